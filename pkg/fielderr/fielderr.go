package fielderr

import (
	"fmt"
	"strings"
)

// FieldError is one problem with one field of a document.
type FieldError struct {
	// Path locates the field, as built by Field, Index and Key: field
	// names joined by ".", list indices in brackets, and map keys after a
	// "." or, when they hold characters other than ASCII letters, digits,
	// '_' and '-', quoted in brackets; e.g. rules[2].overrides[0].cidr or
	// conditions["x.y"]. Empty means the document as a whole.
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

// Kind names the sentinel error that a List of its kind matches with
// errors.Is. Each package that reports field errors declares its own kind,
// an empty struct type whose Sentinel method returns the package's
// ErrInvalid:
//
//	type invalid struct{}
//
//	func (invalid) Sentinel() error { return ErrInvalid }
//
//	type ValidationError = fielderr.List[invalid]
//
// Sentinel must return the same error value every time.
type Kind interface {
	~struct{}
	Sentinel() error
}

// MaxErrors bounds the Errors of a List built by a Report, so that a huge
// bad document cannot make a huge error; the problems beyond it are
// counted in Omitted.
const MaxErrors = 1000

// List lists the problems found in one document. A *List matches its
// kind's sentinel error, and no other, with errors.Is; it is found with
// errors.As as a *List[K] (usually through an alias such as
// *rule.ValidationError). The zero List is an empty list.
type List[K Kind] struct {
	// Errors are the problems, in the order the reporting package
	// documents (usually document order); a Report lists at most
	// MaxErrors of them.
	Errors []FieldError
	// Omitted counts the problems found beyond those listed.
	Omitted int
}

// Error lists the problems one per line, followed by a line
// "(and N more problems)" when Omitted is above zero.
func (e *List[K]) Error() string {
	var b strings.Builder
	for i, fe := range e.Errors {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(fe.Error())
	}
	if e.Omitted > 0 {
		if len(e.Errors) > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "(and %d more problems)", e.Omitted)
	}
	return b.String()
}

// Is reports whether target is the sentinel error of e's kind.
func (e *List[K]) Is(target error) bool {
	var k K
	return target == k.Sentinel()
}

// Paths returns the paths of e's errors, in order, for tests and tools.
func (e *List[K]) Paths() []string {
	p := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		p[i] = fe.Path
	}
	return p
}
