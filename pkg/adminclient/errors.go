package adminclient

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/weirhq/weir/pkg/adminapi"
)

// Sentinel errors, matched by *APIError with errors.Is according to its
// status.
var (
	// ErrUnauthorized: 401, the token is missing or not valid.
	ErrUnauthorized = errors.New("adminclient: unauthorized")
	// ErrForbidden: 403, the token may not do this (a read-only token
	// asked for a write).
	ErrForbidden = errors.New("adminclient: forbidden")
	// ErrNotFound: 404, no such rule (or key, or record).
	ErrNotFound = errors.New("adminclient: not found")
	// ErrConflict: 409, the rule already exists, or the write conflicts
	// with the server's state.
	ErrConflict = errors.New("adminclient: conflict")
	// ErrPrecondition: 412, the resource changed since the ETag given as
	// If-Match was read.
	ErrPrecondition = errors.New("adminclient: precondition failed")
	// ErrInvalid: 422, the document was refused; APIError.Fields says why.
	ErrInvalid = errors.New("adminclient: invalid")
	// ErrUnavailable: 503, typically a coordinator that does not lead and
	// so has no live data.
	ErrUnavailable = errors.New("adminclient: unavailable")
)

var statusErrors = map[int]error{
	http.StatusUnauthorized:        ErrUnauthorized,
	http.StatusForbidden:           ErrForbidden,
	http.StatusNotFound:            ErrNotFound,
	http.StatusConflict:            ErrConflict,
	http.StatusPreconditionFailed:  ErrPrecondition,
	http.StatusUnprocessableEntity: ErrInvalid,
	http.StatusServiceUnavailable:  ErrUnavailable,
}

// APIError is an answer of the admin API other than 2xx: its status and
// the API's error document (adminapi.ErrorBody).
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Message is the server's "error", or the status text when the answer
	// had none.
	Message string
	// Fields are the problems with each field of a refused document, in
	// the server's order; empty for other errors.
	Fields []adminapi.FieldError
	// Omitted counts the problems beyond those listed in Fields.
	Omitted int
	// Leader is the admin URL of the coordinator that leads, when a 503
	// is for want of leadership and the server knows the leader. The
	// client does not follow it: the caller decides whether to send its
	// token there.
	Leader string
}

// Error returns the message and status (and the leader, if known), then
// each field's reason on a line of its own:
//
//	invalid rule (HTTP 422)
//	  limit: required
func (e *APIError) Error() string {
	var b strings.Builder
	msg := e.Message
	if msg == "" {
		msg = strings.ToLower(http.StatusText(e.Status))
	}
	fmt.Fprintf(&b, "%s (HTTP %d)", msg, e.Status)
	if e.Leader != "" {
		fmt.Fprintf(&b, "; the leader is %s", e.Leader)
	}
	for _, f := range e.Fields {
		b.WriteString("\n  ")
		if f.Field != "" {
			b.WriteString(f.Field + ": ")
		}
		b.WriteString(f.Reason)
	}
	if e.Omitted > 0 {
		fmt.Fprintf(&b, "\n  and %d more", e.Omitted)
	}
	return b.String()
}

// Is reports whether target is the sentinel error of e's status.
func (e *APIError) Is(target error) bool {
	s, ok := statusErrors[e.Status]
	return ok && s == target
}
