package fielderr

import (
	"fmt"
	"slices"
)

// Report collects the problems of one document as it is decoded and
// checked.
//
// Problems found while decoding are recorded with Fail, which marks their
// path failed; semantic checks record theirs with Add, which drops a
// problem at a failed path or at anything inside one (a field of it, an
// element of it), so that each mistake is reported once, in the words
// closest to it. A failed empty path, the document as a whole, holds every
// path.
//
// At most MaxErrors problems are kept; the rest are counted. The zero
// Report is empty and ready to use. A Report is not safe for concurrent
// use.
type Report[K Kind] struct {
	errs    []FieldError
	omitted int
	failed  map[string]bool
}

// Fail records a decoding problem at path, the reason formatted as by
// fmt.Sprintf, and marks path failed. It records the problem even when a
// field containing path has failed already.
func (r *Report[K]) Fail(path, format string, args ...any) {
	r.MarkFailed(path)
	r.record(path, format, args)
}

// Add records a semantic problem at path, the reason formatted as by
// fmt.Sprintf, unless IsFailed(path).
func (r *Report[K]) Add(path, format string, args ...any) {
	if r.IsFailed(path) {
		return
	}
	r.record(path, format, args)
}

// MarkFailed marks path failed without recording a problem, for a value
// whose problems have been recorded under other paths.
func (r *Report[K]) MarkFailed(path string) {
	if r.failed == nil {
		r.failed = make(map[string]bool)
	}
	r.failed[path] = true
}

func (r *Report[K]) record(path, format string, args []any) {
	if len(r.errs) >= MaxErrors {
		r.omitted++
		return
	}
	r.errs = append(r.errs, FieldError{Path: path, Reason: fmt.Sprintf(format, args...)})
}

// Omit counts n problems found but not recorded, such as those a nested
// document's List omitted; they add to the Omitted of Err's List.
func (r *Report[K]) Omit(n int) { r.omitted += n }

// IsFailed reports whether path, or a path that contains it, was marked
// failed: the empty path, or a prefix of path that ends just before a "."
// or a "[" (so a failed "rules" holds "rules[0].limit" but not
// "rules_x").
func (r *Report[K]) IsFailed(path string) bool {
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

// Len returns the number of problems kept so far, for use with Sort; it
// does not count those omitted.
func (r *Report[K]) Len() int { return len(r.errs) }

// Sort orders the problems kept from the from'th on (see Len) by cmp,
// stably, so that problems cmp holds equal keep the order they were
// found in. A package sorts before calling Err to list its problems in
// document order.
func (r *Report[K]) Sort(from int, cmp func(a, b FieldError) int) {
	slices.SortStableFunc(r.errs[from:], cmp)
}

// Err returns the problems as a *List[K], or nil if there are none. The
// List shares its Errors with r: record nothing more after calling it.
func (r *Report[K]) Err() error {
	if len(r.errs) == 0 && r.omitted == 0 {
		return nil
	}
	return &List[K]{Errors: r.errs, Omitted: r.omitted}
}
