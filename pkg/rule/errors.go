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
	// well-formed JSON (or, in package rulefile, YAML), together with
	// document.ErrSyntax.
	ErrSyntax = errors.New("rule: malformed document")
	// ErrTooLarge is wrapped by the errors of documents longer than
	// MaxDocumentSize or nested too deeply, together with
	// document.ErrTooLarge.
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

// Report collects the problems of one rule document, in the manner of
// fielderr.Report; its Err is nil or a *ValidationError. Readers of other
// formats that convert to rules (package rulefile's envoyproxy/ratelimit
// converter) report their problems in one, so that they match ErrInvalid
// as a rule file's do. The zero Report is empty and ready to use.
type Report = fielderr.Report[invalid]
