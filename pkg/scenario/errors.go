package scenario

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Sentinel errors. Callers test for them with errors.Is.
var (
	// ErrInvalid is matched by every *ValidationError: a scenario that was
	// read but breaks the rules of the format.
	ErrInvalid = errors.New("scenario: invalid")
	// ErrSyntax is wrapped by the errors of documents that are not
	// well-formed YAML or JSON, or hold more than one YAML document.
	ErrSyntax = errors.New("scenario: malformed document")
	// ErrTooLarge is wrapped by the errors of documents longer than
	// MaxDocumentSize.
	ErrTooLarge = errors.New("scenario: document too large")
)

// FieldError is one problem with one field of a scenario.
type FieldError struct {
	// Path locates the field: YAML field names joined by ".", list indices
	// in brackets, and map keys after a "." or, when they hold characters
	// other than letters, digits, '_' and '-', quoted in brackets; e.g.
	// traffic[2].steps[0].at, traffic[0].attributes.user or
	// rules.rules[1].limit. Empty means the document as a whole.
	Path string
	// Reason says what is wrong, for a person to read.
	Reason string
}

// Error returns "path: reason", or the reason alone when Path is empty.
func (e FieldError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// ValidationError lists every problem found in a scenario, ordered by
// field as the format lists them. It matches ErrInvalid with errors.Is and
// is found with errors.As (as a *ValidationError).
type ValidationError struct {
	// Errors are the problems.
	Errors []FieldError
}

// Error lists the problems one per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		lines[i] = fe.Error()
	}
	return strings.Join(lines, "\n")
}

// Is reports whether target is ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Paths returns the paths of e's errors, in order, for tests and tools.
func (e *ValidationError) Paths() []string {
	p := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		p[i] = fe.Path
	}
	return p
}

// report collects the problems of one scenario. A problem found while
// decoding marks its path as failed, and later semantic checks of that
// path, or of anything inside it, are dropped: each mistake is reported
// once, in the words closest to it.
type report struct {
	errs   []FieldError
	failed map[string]bool
}

// fail records a decoding problem at path and marks the path failed.
func (r *report) fail(path, format string, args ...any) {
	if r.failed == nil {
		r.failed = make(map[string]bool)
	}
	r.failed[path] = true
	r.errs = append(r.errs, FieldError{Path: path, Reason: fmt.Sprintf(format, args...)})
}

// add records a semantic problem at path, unless decoding failed there or
// at a field containing it.
func (r *report) add(path, format string, args ...any) {
	if r.isFailed(path) {
		return
	}
	r.errs = append(r.errs, FieldError{Path: path, Reason: fmt.Sprintf(format, args...)})
}

// isFailed reports whether decoding failed at path or at a field that
// contains it.
func (r *report) isFailed(path string) bool {
	if len(r.failed) == 0 {
		return false
	}
	if r.failed[path] {
		return true
	}
	for i := 0; i < len(path); i++ {
		if (path[i] == '.' || path[i] == '[') && r.failed[path[:i]] {
			return true
		}
	}
	return false
}

// err returns the problems as a *ValidationError, or nil if there are none.
// Problems are sorted by path, stably, so that a field's problems stay in
// the order they were found.
func (r *report) err() error {
	if len(r.errs) == 0 {
		return nil
	}
	errs := append([]FieldError(nil), r.errs...)
	sort.SliceStable(errs, func(i, j int) bool { return pathLess(errs[i].Path, errs[j].Path) })
	return &ValidationError{Errors: errs}
}

// pathLess orders paths field by field, in the order of fieldOrder for
// top-level fields and numerically for list indices, so that errors read
// in document order.
func pathLess(a, b string) bool {
	ra, rb := topRank(a), topRank(b)
	if ra != rb {
		return ra < rb
	}
	pa, pb := splitPath(a), splitPath(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] == pb[i] {
			continue
		}
		na, ea := strconv.Atoi(pa[i])
		nb, eb := strconv.Atoi(pb[i])
		if ea == nil && eb == nil {
			return na < nb
		}
		return pa[i] < pb[i]
	}
	return len(pa) < len(pb)
}

// fieldOrder is the order of the top-level fields in the format.
var fieldOrder = []string{"name", "description", "duration", "interval", "ttl", "seed", "dcs", "rules", "traffic", "faults", "goals"}

func topRank(p string) int {
	end := strings.IndexAny(p, ".[")
	if end < 0 {
		end = len(p)
	}
	for i, f := range fieldOrder {
		if p[:end] == f {
			return i + 1
		}
	}
	if p == "" {
		return 0
	}
	return len(fieldOrder) + 1
}

// splitPath splits a path into its field names and indices.
func splitPath(p string) []string {
	return strings.FieldsFunc(p, func(c rune) bool { return c == '.' || c == '[' || c == ']' })
}

// field returns the path of the named field of the value at path.
func field(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// index returns the path of the i'th element of the list at path.
func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// key returns the path of the entry k of the map at path.
func key(path, k string) string {
	if k != "" && strings.IndexFunc(k, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-')
	}) < 0 {
		return field(path, k)
	}
	return path + "[" + strconv.Quote(k) + "]"
}
