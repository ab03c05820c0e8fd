package limiter

import (
	"sync"
	"sync/atomic"
	"time"
)

// gate bounds the store requests in flight: a call takes as many units as
// it has requests, and waits at most a deadline for them; one that cannot
// get in is shed. A call larger than the whole gate gets in alone, when it
// is empty. The fast path (room available) is one compare-and-swap. Safe
// for concurrent use.
type gate struct {
	max     int64
	used    atomic.Int64
	waiters atomic.Int64

	mu      sync.Mutex
	changed chan struct{} // closed, and replaced, when units are given back
}

func newGate(max int64) *gate { return &gate{max: max, changed: make(chan struct{})} }

// tryEnter takes n units if there is room.
func (g *gate) tryEnter(n int64) bool {
	n = min(n, g.max)
	for {
		u := g.used.Load()
		if u+n > g.max {
			return false
		}
		if g.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// enter takes n units, waiting for room until done is closed or wait has
// passed; it reports whether it took them.
func (g *gate) enter(done <-chan struct{}, n int64, wait time.Duration) bool {
	if g.tryEnter(n) {
		return true
	}
	g.waiters.Add(1)
	defer g.waiters.Add(-1)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		g.mu.Lock()
		ch := g.changed
		g.mu.Unlock()
		if g.tryEnter(n) {
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			return g.tryEnter(n)
		case <-done:
			return false
		}
	}
}

// leave gives back n units taken by enter.
func (g *gate) leave(n int64) {
	g.used.Add(-min(n, g.max))
	if g.waiters.Load() > 0 {
		g.mu.Lock()
		close(g.changed)
		g.changed = make(chan struct{})
		g.mu.Unlock()
	}
}
