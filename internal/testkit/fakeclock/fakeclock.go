// Package fakeclock is the one fake clock of Weir's tests: time that moves
// only when a test says so, with timers that fire when it passes them.
//
// A Clock fits every way Weir's packages take time: as a func() time.Time
// (Config.Now fields: pass c.Now), and as an interface with Now and After
// (usage.Clock and the like). It is safe for concurrent use.
package fakeclock

import (
	"sync"
	"testing"
	"time"
)

// Start is the time a New clock shows when given the zero time: a fixed,
// readable instant, so that failures print the same times on every run.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a fake clock. The zero value is not usable: call New.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	onNow   func()
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// New returns a clock showing now, or Start when now is the zero time.
func New(now time.Time) *Clock {
	if now.IsZero() {
		now = Start
	}
	return &Clock{now: now}
}

// Now returns the clock's time, after running the function set by OnNow.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	now, hook := c.now, c.onNow
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	return now
}

// OnNow sets a function that every Now runs (outside the clock's lock),
// nil for none: code that reads the clock between two steps lets a test
// slip a concurrent change in there.
func (c *Clock) OnNow(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onNow = f
}

// After returns a channel that receives the clock's time once the clock has
// been moved d past the time of the call; at once when d ≤ 0.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	return ch
}

// Advance moves the clock forward by d (a negative d moves it back) and
// fires every timer now due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(c.now.Add(d))
}

// Set moves the clock to t and fires every timer now due.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(t)
}

func (c *Clock) setLocked(t time.Time) {
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

// Pending returns the number of timers not yet fired.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// WaitForTimers waits, in real time and for at most 5 s, until at least n
// timers are pending: the way a test knows that the code under test has
// reached its wait before it moves the clock. It fails t on time-out.
func (c *Clock) WaitForTimers(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.Pending() < n {
		if time.Now().After(deadline) {
			t.Fatalf("waited 5s for %d pending timers, have %d", n, c.Pending())
		}
		time.Sleep(time.Millisecond)
	}
}
