package pace_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/pace"
)

// TestGo checks that Go stops with its context, calls nothing at a rate
// of 0, and calls at about the rate asked (loosely: the machine is shared).
func TestGo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rate     float64
		min, max int64
	}{
		{"idle", 0, 0, 0},
		{"100/s for 0.5 s", 100, 20, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			var wg sync.WaitGroup
			var calls atomic.Int64
			pace.Go(ctx, &wg, func() float64 { return tc.rate }, func() { calls.Add(1) })
			wg.Wait() // returns only once the context has stopped Go
			if n := calls.Load(); n < tc.min || n > tc.max {
				t.Errorf("%d calls, want %d to %d", n, tc.min, tc.max)
			}
		})
	}
}
