//go:build !linux

package main

import (
	"context"
	"time"
)

// run releases due calls until ctx ends, then closes p.due, and returns
// each wake-up's lag (see wake). Off Linux
// it uses a Go ticker, which may wake up to a millisecond late; the lags
// show by how much.
func (p *pacer) run(ctx context.Context) ([]time.Duration, error) {
	defer close(p.due)
	t := time.NewTicker(p.interval)
	defer t.Stop()
	var next int64
	lags := make([]time.Duration, 0, 1<<16)
	for {
		select {
		case <-ctx.Done():
			return lags, nil
		case now := <-t.C:
			next, lags = p.wake(ctx, next, now, lags)
		}
	}
}
