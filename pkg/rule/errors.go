package rule

import (
	"errors"

	"github.com/weirhq/weir/pkg/fielderr"
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

// FieldError is one problem with one field of a rule document. Its Path
// holds JSON field names, list indices and map keys, as fielderr builds
// them: e.g. rules[2].overrides[0].cidr or conditions["x.y"]. Empty means
// the document as a whole.
type FieldError = fielderr.FieldError

// ValidationError lists every problem found in a rule or a set, in document
// order as far as possible, at most fielderr.MaxErrors of them, with the
// rest counted in Omitted. It matches ErrInvalid, and not the sentinels of
// other packages, with errors.Is, and is found with errors.As (as a
// *ValidationError).
type ValidationError = fielderr.List[invalid]

// invalid is the fielderr.Kind of this package's errors: they match
// ErrInvalid.
type invalid struct{}

// Sentinel returns ErrInvalid.
func (invalid) Sentinel() error { return ErrInvalid }

// report collects the problems of one document; see fielderr.Report.
type report = fielderr.Report[invalid]
