package scenario

import (
	"cmp"
	"errors"
	"strconv"
	"strings"

	"github.com/weirhq/weir/pkg/fielderr"
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

// FieldError is one problem with one field of a scenario. Its Path holds
// YAML field names, list indices and map keys, as fielderr builds them:
// e.g. traffic[2].steps[0].at, traffic[0].attributes.user or
// rules.rules[1].limit. Empty means the document as a whole.
type FieldError = fielderr.FieldError

// ValidationError lists every problem found in a scenario, ordered by
// field as the format lists them, at most fielderr.MaxErrors of them, with
// the rest counted in Omitted. It matches ErrInvalid, and not the
// sentinels of other packages (not rule.ErrInvalid), with errors.Is, and
// is found with errors.As (as a *ValidationError).
type ValidationError = fielderr.List[invalid]

// invalid is the fielderr.Kind of this package's errors: they match
// ErrInvalid.
type invalid struct{}

// Sentinel returns ErrInvalid.
func (invalid) Sentinel() error { return ErrInvalid }

// report collects the problems of one scenario; see fielderr.Report.
// Callers return them with reportErr, which puts them in document order.
type report = fielderr.Report[invalid]

// reportErr returns r's problems as a *ValidationError, or nil if there
// are none. Problems are sorted by path with comparePaths, stably, so that
// a field's problems stay in the order they were found.
func reportErr(r *report) error {
	r.Sort(0, func(a, b FieldError) int { return comparePaths(a.Path, b.Path) })
	return r.Err()
}

// comparePaths orders paths field by field, in the order of fieldOrder for
// top-level fields and numerically for list indices, so that errors read
// in document order. It returns -1 if a comes first, +1 if b does, and 0
// if they are the same.
func comparePaths(a, b string) int {
	if c := cmp.Compare(topRank(a), topRank(b)); c != 0 {
		return c
	}
	pa, pb := splitPath(a), splitPath(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] == pb[i] {
			continue
		}
		na, ea := strconv.Atoi(pa[i])
		nb, eb := strconv.Atoi(pb[i])
		if ea == nil && eb == nil {
			return cmp.Compare(na, nb)
		}
		return strings.Compare(pa[i], pb[i])
	}
	return cmp.Compare(len(pa), len(pb))
}

// fieldOrder is the order of the top-level fields in the format.
var fieldOrder = []string{"name", "description", "duration", "interval", "ttl", "seed", "dcs", "rules", "traffic", "faults", "goals"}

// topRank ranks the top-level field of p: 0 for the document as a whole,
// then fieldOrder's, then any other field.
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
