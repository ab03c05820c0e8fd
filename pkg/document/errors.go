package document

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinel errors. A package that reads documents wraps Parse errors in
// its own sentinels with Wrap; these let callers of the parsers alone test
// them with errors.Is.
var (
	// ErrSyntax is matched by the errors of documents that are not
	// well-formed: not JSON or YAML, empty, or more than one YAML
	// document.
	ErrSyntax = errors.New("document: malformed")
	// ErrTooLarge is matched by the errors of documents over a Limit.
	ErrTooLarge = errors.New("document: too large")
)

// DefaultMaxDepth is the nesting of lists and objects allowed when
// Limits.MaxDepth is 0. The documents Weir reads nest a few levels deep;
// anything far deeper is hostile.
const DefaultMaxDepth = 64

// Limits bounds the documents a parser reads. The zero Limits allows any
// size and DefaultMaxDepth.
type Limits struct {
	// MaxSize is the largest document in bytes; 0 means no limit.
	MaxSize int
	// MaxDepth is the deepest nesting of lists and objects; 0 means
	// DefaultMaxDepth.
	MaxDepth int
}

// Depth returns the deepest nesting l allows.
func (l Limits) Depth() int {
	if l.MaxDepth <= 0 {
		return DefaultMaxDepth
	}
	return l.MaxDepth
}

// CheckSize returns an *Error matching ErrTooLarge if data is over
// l.MaxSize, else nil.
func (l Limits) CheckSize(data []byte) error {
	if l.MaxSize > 0 && len(data) > l.MaxSize {
		return &Error{TooLarge: true, Reason: fmt.Sprintf("%d bytes; at most %d", len(data), l.MaxSize)}
	}
	return nil
}

// Error is a document that could not be parsed. It matches ErrTooLarge
// with errors.Is when TooLarge is set, ErrSyntax otherwise.
type Error struct {
	// Line and Column locate the problem, from 1; 0 when unknown.
	Line, Column int
	// Reason says what is wrong, for a person to read.
	Reason string
	// TooLarge says the document is over a Limit.
	TooLarge bool
}

// Error returns "line L, column C: reason", without what is unknown of
// the position.
func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Column > 0:
		return "line " + strconv.Itoa(e.Line) + ", column " + strconv.Itoa(e.Column) + ": " + e.Reason
	case e.Line > 0:
		return "line " + strconv.Itoa(e.Line) + ": " + e.Reason
	}
	return e.Reason
}

// Is reports whether target is ErrTooLarge (for an error of size) or
// ErrSyntax (for any other).
func (e *Error) Is(target error) bool {
	if e.TooLarge {
		return target == ErrTooLarge
	}
	return target == ErrSyntax
}

// Wrap returns err, an error of a parser, wrapped in the caller's own
// sentinel as well: tooLarge when err matches ErrTooLarge, syntax
// otherwise, e.g. "rule: malformed document: line 2, column 12: ...".
// It returns nil for nil.
func Wrap(err, syntax, tooLarge error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrTooLarge):
		return fmt.Errorf("%w: %w", tooLarge, err)
	}
	return fmt.Errorf("%w: %w", syntax, err)
}
