// Package backoff paces retries: exponentially growing waits with jitter,
// so that many processes retrying against one etcd or Kafka do not retry in
// step.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff yields waits: the nth is drawn uniformly from [d/2, d], where
// d = min(Min × 2ⁿ, Max). The zero value waits 0; set Min and Max. Not safe
// for concurrent use; each retry loop owns its own.
type Backoff struct {
	Min, Max time.Duration
	n        int
}

// Next returns the next wait and moves on.
func (b *Backoff) Next() time.Duration {
	d := b.Min
	for i := 0; i < b.n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if d < b.Max {
		b.n++
	}
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// Reset starts again from Min, after a success.
func (b *Backoff) Reset() { b.n = 0 }

// Wait sleeps for the next wait, or until ctx ends; it reports whether it
// waited the whole time.
func (b *Backoff) Wait(ctx context.Context) bool { return Sleep(ctx, b.Next()) }

// Sleep waits for d, or until ctx ends; it reports whether it waited.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
