// Package pace drives a test's load at a rate that may change while it
// runs, in real time and bounded by the test's context.
package pace

import (
	"context"
	"sync"
	"time"
)

// Go calls f at rate() calls a second, on a goroutine of wg, until ctx is
// done. rate is asked before each call; at 0 or below Go idles, asking
// again every 20 ms. f runs on that goroutine, so a call that outlasts the
// gap delays the next; Go catches up on calls it fell behind by less than a
// second and drops the rest rather than bursting.
func Go(ctx context.Context, wg *sync.WaitGroup, rate func() float64, f func()) {
	wg.Go(func() {
		next := time.Now()
		for ctx.Err() == nil {
			r := rate()
			if r <= 0 {
				time.Sleep(20 * time.Millisecond)
				next = time.Now()
				continue
			}
			next = next.Add(time.Duration(float64(time.Second) / r))
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			} else if d < -time.Second {
				next = time.Now() // fell behind: do not burst to catch up
			}
			f()
		}
	})
}
