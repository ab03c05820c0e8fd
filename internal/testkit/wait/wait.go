// Package wait is how Weir's tests wait for something to become true in
// real time — a process to come up, a watch to deliver, a goroutine to
// reach its timer — instead of sleeping for a guessed duration.
package wait

import (
	"testing"
	"time"
)

// poll is how often a condition is asked again.
const poll = time.Millisecond

// For asks cond until it holds and returns how long that took; after d it
// fails t (t.Fatalf) saying what it waited for. cond must not block.
func For(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(poll)
	}
	return time.Since(start)
}

// Until is For without failing: it reports whether cond held within d.
func Until(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(poll)
	}
	return true
}
