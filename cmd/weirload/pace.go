package main

import (
	"context"
	"time"
)

// pacer hands out the sequence numbers of the calls that are due: call k
// is due at start + k·interval. It sends each number once, in order, on
// its channel, and reports how late it noticed each batch of due calls —
// the load client's own timer lag, which would otherwise hide in the
// latencies it measures.
type pacer struct {
	start    time.Time
	interval time.Duration
	// lagsFrom: wake-ups before it (the warm-up) are not in the lags.
	lagsFrom time.Time
	due      chan int64
}

func newPacer(start time.Time, interval time.Duration, lagsFrom time.Time) *pacer {
	// Room for a second of calls: when every worker is busy the due calls
	// wait here, and their latency still counts from when they were due.
	return &pacer{start: start, interval: interval, lagsFrom: lagsFrom, due: make(chan int64, max(1024, int(time.Second/interval)))}
}

// scheduled returns when call k was due.
func (p *pacer) scheduled(k int64) time.Time {
	return p.start.Add(time.Duration(k) * p.interval)
}

// wake sends the calls due at now, from next on, and returns the first
// one not yet due. When it sent any after lagsFrom, it appends to lags how
// long after the first of them was due it woke. It stops early when ctx
// ends.
func (p *pacer) wake(ctx context.Context, next int64, now time.Time, lags []time.Duration) (int64, []time.Duration) {
	first := next
	last := int64(now.Sub(p.start) / p.interval)
	for ; next <= last; next++ {
		select {
		case p.due <- next:
		case <-ctx.Done():
			return next, lags
		}
	}
	if next > first && !now.Before(p.lagsFrom) {
		lags = append(lags, now.Sub(p.scheduled(first)))
	}
	return next, lags
}
