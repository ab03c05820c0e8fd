package etcdquota

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff yields exponentially growing waits with jitter: the nth wait is
// drawn uniformly from [d/2, d], d = min(lo × 2ⁿ, hi). Not safe for
// concurrent use; each loop owns its own.
type backoff struct {
	lo, hi time.Duration
	n      int
}

func (b *backoff) next() time.Duration {
	d := b.lo
	for i := 0; i < b.n && d < b.hi; i++ {
		d *= 2
	}
	d = min(d, b.hi)
	if d < b.hi {
		b.n++
	}
	return d/2 + rand.N(d/2+1)
}

func (b *backoff) reset() { b.n = 0 }

// sleep waits for d, or until ctx ends; it reports whether it waited.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
