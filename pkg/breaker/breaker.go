// Package breaker is a small circuit breaker that keeps a dead or hung
// dependency from adding its timeout to every call.
//
// A Breaker starts closed: calls go through. After Config.Failures
// consecutive failures it opens: calls are refused at once. Failures are
// counted as events, not as calls: with FailureOf, the failure of a call
// that started before the last failure counted is the same event seen by
// another caller (concurrent calls stuck behind one stall all fail
// together), and does not count again. So the breaker opens on a
// dependency that keeps failing calls made after it failed — a dead one —
// not on one stall that many callers happened to share. After
// Config.Cooldown it lets exactly one probe through (half-open); the probe's
// success closes it, its failure opens it for another cooldown. Time comes
// from an injected clock so tests need not sleep.
package breaker

import (
	"fmt"
	"sync"
	"time"
)

// State is a breaker's state.
type State int

// The states.
const (
	Closed State = iota
	Open
	HalfOpen
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Config configures a Breaker. The zero value is usable.
type Config struct {
	// Failures is how many consecutive failures open the breaker. Default 3.
	Failures int
	// Cooldown is how long an open breaker refuses calls before it lets a
	// probe through. Default 500ms.
	Cooldown time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if c.Failures < 0 || c.Cooldown < 0 {
		return fmt.Errorf("breaker: negative Failures %d or Cooldown %v", c.Failures, c.Cooldown)
	}
	return nil
}

// Breaker is a circuit breaker, safe for concurrent use. Create it with New.
type Breaker struct {
	failures int
	cooldown time.Duration
	now      func() time.Time

	mu       sync.Mutex
	state    State
	streak   int
	lastFail time.Time // when the last failure counted was recorded
	openedAt time.Time
	onChange func(State)
}

// New returns a closed breaker. onChange, if not nil, is called (without
// the breaker's lock held) with each new state.
func New(cfg Config, onChange func(State)) (*Breaker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Breaker{failures: cfg.Failures, cooldown: cfg.Cooldown, now: cfg.Now, onChange: onChange}
	if b.failures == 0 {
		b.failures = 3
	}
	if b.cooldown == 0 {
		b.cooldown = 500 * time.Millisecond
	}
	if b.now == nil {
		b.now = time.Now
	}
	return b, nil
}

// Allow reports whether a call may go through. When it returns probe true
// the breaker is half-open and this call is its one probe: the caller must
// report the probe's outcome with Success or Failure.
func (b *Breaker) Allow() (ok, probe bool) {
	b.mu.Lock()
	switch b.state {
	case Closed:
		b.mu.Unlock()
		return true, false
	case Open:
		if b.now().Sub(b.openedAt) < b.cooldown {
			b.mu.Unlock()
			return false, false
		}
		b.state = HalfOpen
		b.mu.Unlock()
		b.notify(HalfOpen)
		return true, true
	default: // half-open: a probe is out
		b.mu.Unlock()
		return false, false
	}
}

// Success records a successful call.
func (b *Breaker) Success() {
	b.mu.Lock()
	changed := b.state != Closed
	b.state, b.streak = Closed, 0
	b.mu.Unlock()
	if changed {
		b.notify(Closed)
	}
}

// Failure records a failed call, counted whatever its start (see
// FailureOf).
func (b *Breaker) Failure() { b.failure(time.Time{}, false) }

// FailureOf records the failure of a call that started at start. In the
// closed state, it counts only when the call started at or after the last
// failure counted: an earlier one failed with it, in the same event. A
// probe's failure (half-open) always reopens the breaker.
func (b *Breaker) FailureOf(start time.Time) { b.failure(start, true) }

func (b *Breaker) failure(start time.Time, dated bool) {
	b.mu.Lock()
	if dated && b.state == Closed && b.streak > 0 && start.Before(b.lastFail) {
		b.mu.Unlock()
		return
	}
	b.streak++
	b.lastFail = b.now()
	open := b.state == HalfOpen || (b.state == Closed && b.streak >= b.failures)
	if open {
		b.state, b.openedAt = Open, b.now()
	}
	b.mu.Unlock()
	if open {
		b.notify(Open)
	}
}

// Release gives back a probe whose outcome is unknown (its caller gave up
// before the call said anything about the dependency): the breaker goes
// back to open with its cooldown already over, so the next Allow probes
// again. It does nothing unless the breaker is half-open.
func (b *Breaker) Release() {
	b.mu.Lock()
	released := b.state == HalfOpen
	if released {
		b.state = Open
	}
	b.mu.Unlock()
	if released {
		b.notify(Open)
	}
}

// State returns the breaker's state.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

func (b *Breaker) notify(s State) {
	if b.onChange != nil {
		b.onChange(s)
	}
}
