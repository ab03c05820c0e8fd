package rule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Sentinel errors. Callers test for them with errors.Is.
var (
	// ErrInvalid is matched by every *ValidationError: a document or value
	// that was read but breaks the rules of the format.
	ErrInvalid = errors.New("rule: invalid")
	// ErrSyntax is wrapped by the errors of documents that are not
	// well-formed JSON (or, in package rulefile, YAML).
	ErrSyntax = errors.New("rule: malformed document")
	// ErrTooLarge is wrapped by the errors of documents longer than
	// MaxDocumentSize or nested too deeply.
	ErrTooLarge = errors.New("rule: document too large")
	// ErrPathPattern is wrapped by CompilePath's errors.
	ErrPathPattern = errors.New("rule: invalid path pattern")
)

// FieldError is one problem with one field of a rule document.
type FieldError struct {
	// Path locates the field: JSON field names joined by ".", list indices
	// in brackets, and map keys after a "." or, when they hold characters
	// other than letters, digits, '_' and '-', quoted in brackets; e.g.
	// rules[2].overrides[0].cidr or conditions["x.y"]. Empty means the
	// document as a whole.
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

// maxErrors bounds ValidationError.Errors so that a huge bad document
// cannot make a huge error.
const maxErrors = 1000

// ValidationError lists every problem found in a rule or a set, in document
// order as far as possible. It matches ErrInvalid with errors.Is, and is
// found with errors.As (as a *ValidationError).
type ValidationError struct {
	// Errors are the problems, at most 1,000 of them.
	Errors []FieldError
	// Omitted counts the problems found beyond those listed.
	Omitted int
}

// Error lists the problems one per line.
func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, fe := range e.Errors {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(fe.Error())
	}
	if e.Omitted > 0 {
		fmt.Fprintf(&b, "\n(and %d more problems)", e.Omitted)
	}
	return b.String()
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

// report collects the problems of one document. Problems found while
// decoding mark their path as failed; a later semantic check of a failed
// path, or of anything inside it, is dropped, so each mistake is reported
// once, in the words closest to it.
type report struct {
	errs    []FieldError
	omitted int
	failed  map[string]bool
}

// fail records a decoding problem at path and marks the path failed.
func (r *report) fail(path, format string, args ...any) {
	if r.failed == nil {
		r.failed = make(map[string]bool)
	}
	r.failed[path] = true
	r.append(path, format, args)
}

// add records a semantic problem at path, unless decoding failed there.
func (r *report) add(path, format string, args ...any) {
	if r.isFailed(path) {
		return
	}
	r.append(path, format, args)
}

func (r *report) append(path, format string, args []any) {
	if len(r.errs) >= maxErrors {
		r.omitted++
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
	if r.failed[path] || r.failed[""] {
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
func (r *report) err() error {
	if len(r.errs) == 0 {
		return nil
	}
	return &ValidationError{Errors: r.errs, Omitted: r.omitted}
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
