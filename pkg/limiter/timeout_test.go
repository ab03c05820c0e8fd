package limiter

import (
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/fakeclock"
)

const ms = time.Millisecond

// The adaptive timeout's arithmetic, worked by hand: twice the slowest
// success of the current and the previous five-second window, plus the
// store's pause (0, or 25ms as Redis at hz 10), at least the floor (20ms),
// at most the ceiling (200ms); a call that timed out counts as one that
// took its bound. Each case starts from a bound that has learned (a whole
// window of 1ms calls behind it).
func TestAdaptiveTimeout(t *testing.T) {
	type step struct {
		advance  time.Duration // the clock moves this first; then
		observe  time.Duration // a success with this latency, or
		timedOut time.Duration // a call given this bound times out
		want     time.Duration
	}
	tests := []struct {
		name  string
		pause time.Duration
		steps []step
	}{
		{"idle: the floor", 0, []step{{observe: 1 * ms, want: 20 * ms}, {observe: 3 * ms, want: 20 * ms}}},
		{"busy: twice the slowest", 0, []step{{observe: 16 * ms, want: 32 * ms}, {observe: 2 * ms, want: 32 * ms}, {observe: 25 * ms, want: 50 * ms}}},
		{"the ceiling", 0, []step{{observe: 150 * ms, want: 200 * ms}}},
		{"a slow call weighs for one to two windows", 0, []step{
			{observe: 25 * ms, want: 50 * ms},
			{advance: 5000 * ms, observe: 1 * ms, want: 50 * ms}, // previous window
			{advance: 4999 * ms, observe: 1 * ms, want: 50 * ms},
			{advance: 1 * ms, observe: 1 * ms, want: 20 * ms}, // two windows on
		}},
		{"a window with no call forgets, and the bound learns again", 0, []step{
			{observe: 25 * ms, want: 50 * ms},
			{advance: 12500 * ms, observe: 1 * ms, want: 200 * ms},
			{advance: 4999 * ms, observe: 1 * ms, want: 200 * ms},
			{advance: 1 * ms, observe: 1 * ms, want: 20 * ms},
		}},
		{"a timeout doubles", 0, []step{
			{observe: 16 * ms, want: 32 * ms},
			{advance: 100 * ms, timedOut: 32 * ms, want: 64 * ms},
		}},
		{"calls of one stall, under one bound, double it once", 0, []step{
			{observe: 16 * ms, want: 32 * ms},
			{advance: 100 * ms, timedOut: 32 * ms, want: 64 * ms},
			{advance: 1 * ms, timedOut: 32 * ms, want: 64 * ms},
			{advance: 1 * ms, timedOut: 32 * ms, want: 64 * ms},
		}},
		{"a call under the doubled bound doubles it again, up to the ceiling", 0, []step{
			{observe: 16 * ms, want: 32 * ms},
			{advance: 100 * ms, timedOut: 32 * ms, want: 64 * ms},
			{advance: 100 * ms, timedOut: 64 * ms, want: 128 * ms},
			{advance: 200 * ms, timedOut: 128 * ms, want: 200 * ms},
		}},
		{"the doubling lasts one to two windows", 0, []step{
			{observe: 1 * ms, want: 20 * ms},
			{advance: 100 * ms, timedOut: 20 * ms, want: 40 * ms},
			{advance: 5000 * ms, observe: 1 * ms, want: 40 * ms},
			{advance: 5000 * ms, observe: 1 * ms, want: 20 * ms},
		}},
		{"a stopped store from idle: 20, 40, 80ms", 0, []step{
			{observe: 1 * ms, want: 20 * ms},
			{advance: 20 * ms, timedOut: 20 * ms, want: 40 * ms},
			{advance: 40 * ms, timedOut: 40 * ms, want: 80 * ms},
			{advance: 80 * ms, timedOut: 80 * ms, want: 160 * ms},
		}},
		{"a pause is added to twice the slowest", 25 * ms, []step{
			{observe: 1 * ms, want: 27 * ms},
			{observe: 16 * ms, want: 57 * ms},
			{observe: 90 * ms, want: 200 * ms},
		}},
		{"a pause under the floor: the floor", 10 * ms, []step{{observe: 2 * ms, want: 20 * ms}}},
		{"a stopped store from idle, with Redis's pause at hz 100: 20, 42.5, 87.5ms", 2500 * time.Microsecond, []step{
			{observe: 1 * ms, want: 20 * ms},
			{advance: 20 * ms, timedOut: 20 * ms, want: 42500 * time.Microsecond},
			{advance: 43 * ms, timedOut: 42500 * time.Microsecond, want: 87500 * time.Microsecond},
		}},
		{"a stopped store from idle, with a pause of 25ms: 27, 79, 183ms", 25 * ms, []step{
			{observe: 1 * ms, want: 27 * ms},
			{advance: 27 * ms, timedOut: 27 * ms, want: 79 * ms},
			{advance: 79 * ms, timedOut: 79 * ms, want: 183 * ms},
			{advance: 183 * ms, timedOut: 183 * ms, want: 200 * ms},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeclock.New(fakeclock.Start)
			a := learned(c, tt.pause)
			for i, s := range tt.steps {
				c.Advance(s.advance)
				if s.observe > 0 {
					a.observe(s.observe, c.Now())
				} else {
					a.timedOut(s.timedOut, c.Now())
				}
				if got := a.bound(); got != s.want {
					t.Fatalf("step %d: got %v, want %v", i, got, s.want)
				}
			}
		})
	}
}

// learned returns a bound of 20 to 200ms with pause that has seen a whole
// window of 1ms calls, the last at c's now.
func learned(c *fakeclock.Clock, pause time.Duration) *adaptiveTimeout {
	a := newAdaptiveTimeout(20*ms, 200*ms, pause)
	a.observe(1*ms, c.Now())
	c.Advance(timeoutWindow)
	a.observe(1*ms, c.Now())
	return a
}

// A new bound has seen no stall of its store: it is the ceiling until it
// has seen a whole window of calls, timeouts included.
func TestAdaptiveTimeoutLearnsAtTheCeiling(t *testing.T) {
	c := fakeclock.New(fakeclock.Start)
	a := newAdaptiveTimeout(20*ms, 200*ms, 0)
	if got := a.bound(); got != 200*ms {
		t.Fatalf("new: got %v, want the ceiling 200ms", got)
	}
	a.observe(1*ms, c.Now())
	c.Advance(timeoutWindow - 1)
	a.observe(3*ms, c.Now())
	a.timedOut(200*ms, c.Now())
	if got := a.bound(); got != 200*ms {
		t.Fatalf("within the first window: got %v, want the ceiling 200ms", got)
	}
	c.Advance(1)
	a.observe(1*ms, c.Now())
	if got := a.bound(); got != 200*ms {
		t.Fatalf("a window on, after a timeout in it: got %v, want 200ms", got)
	}
	c.Advance(timeoutWindow)
	a.observe(5*ms, c.Now())
	if got := a.bound(); got != 20*ms {
		t.Fatalf("two windows on, 1 and 5ms calls: got %v, want the floor 20ms", got)
	}
	if got := learned(c, 0).bound(); got != 20*ms {
		t.Fatalf("learned: got %v, want the floor 20ms", got)
	}
}

func TestAdaptiveTimeoutCeilingUnderTheFloor(t *testing.T) {
	a := newAdaptiveTimeout(20*ms, 0, 0)
	a.observe(time.Second, fakeclock.Start)
	if got := a.bound(); got != 20*ms {
		t.Errorf("ceiling under the floor: got %v, want 20ms", got)
	}
}

func TestGate(t *testing.T) {
	g := newGate(10)
	if !g.tryEnter(6) || !g.tryEnter(4) {
		t.Fatal("10 units in a gate of 10: refused")
	}
	if g.tryEnter(1) {
		t.Fatal("an 11th unit: got in")
	}
	never := make(chan struct{})
	if g.enter(never, 1, time.Millisecond) {
		t.Fatal("a full gate, no one leaving: got in")
	}
	got := make(chan bool)
	go func() { got <- g.enter(never, 3, time.Minute) }()
	for g.waiters.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	g.leave(4)
	if !<-got {
		t.Fatal("4 units given back: a waiter for 3 did not get in")
	}
	done := make(chan struct{})
	close(done)
	if g.enter(done, 5, time.Minute) {
		t.Fatal("a caller that gave up: got in")
	}
	g.leave(9)
	if !g.tryEnter(100) {
		t.Fatal("a call larger than the gate, gate empty: refused")
	}
	if g.tryEnter(1) {
		t.Fatal("a call larger than the gate holds all of it: another got in")
	}
}
