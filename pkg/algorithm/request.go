package algorithm

import (
	"errors"
	"fmt"
)

// MaxKeyLen is the longest Request.Key a store accepts.
const MaxKeyLen = 4096

// ErrInvalidRequest is wrapped by Request.Validate's errors.
var ErrInvalidRequest = errors.New("algorithm: invalid request")

// Request asks a store for a decision on one key.
type Request struct {
	// Key identifies the state; callers derive it from the rule and the key
	// value (for example "user-login-attempt/john_doe"). Non-empty, at most
	// MaxKeyLen bytes. A key's state is kept per algorithm: changing a
	// rule's algorithm starts its keys afresh.
	Key string
	// Params is the limit in force for the key.
	Params Params
	// Cost is how much the request spends; zero only observes the key.
	Cost int64
}

// Validate reports whether r is well formed.
func (r Request) Validate() error {
	switch {
	case r.Key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidRequest)
	case len(r.Key) > MaxKeyLen:
		return fmt.Errorf("%w: key of %d bytes exceeds %d", ErrInvalidRequest, len(r.Key), MaxKeyLen)
	case r.Cost < 0:
		return fmt.Errorf("%w: negative cost %d", ErrInvalidRequest, r.Cost)
	}
	if err := r.Params.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return nil
}

// Result is a store's answer to one Request: a decision, or the error that
// prevented one.
type Result struct {
	Decision
	Err error
}
