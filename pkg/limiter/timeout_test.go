package limiter

import (
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/fakeclock"
)

const ms = time.Millisecond

// The adaptive timeout's arithmetic, worked by hand: twice the slowest
// success of the current and the previous five-second window, at least the
// floor (20ms), at most the ceiling (200ms); a call that timed out counts
// as one that took its bound.
func TestAdaptiveTimeout(t *testing.T) {
	type step struct {
		advance  time.Duration // the clock moves this first; then
		observe  time.Duration // a success with this latency, or
		timedOut time.Duration // a call given this bound times out
		want     time.Duration
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"idle: the floor", []step{{observe: 1 * ms, want: 20 * ms}, {observe: 3 * ms, want: 20 * ms}}},
		{"busy: twice the slowest", []step{{observe: 16 * ms, want: 32 * ms}, {observe: 2 * ms, want: 32 * ms}, {observe: 25 * ms, want: 50 * ms}}},
		{"the ceiling", []step{{observe: 150 * ms, want: 200 * ms}}},
		{"a slow call weighs for one to two windows", []step{
			{observe: 25 * ms, want: 50 * ms},
			{advance: 5000 * ms, observe: 1 * ms, want: 50 * ms}, // previous window
			{advance: 4999 * ms, observe: 1 * ms, want: 50 * ms},
			{advance: 1 * ms, observe: 1 * ms, want: 20 * ms}, // two windows on
		}},
		{"a window with no call forgets", []step{
			{observe: 25 * ms, want: 50 * ms},
			{advance: 12500 * ms, observe: 1 * ms, want: 20 * ms},
		}},
		{"a timeout doubles", []step{
			{observe: 16 * ms, want: 32 * ms},
			{advance: 100 * ms, timedOut: 32 * ms, want: 64 * ms},
		}},
		{"calls of one stall, under one bound, double it once", []step{
			{observe: 16 * ms, want: 32 * ms},
			{advance: 100 * ms, timedOut: 32 * ms, want: 64 * ms},
			{advance: 1 * ms, timedOut: 32 * ms, want: 64 * ms},
			{advance: 1 * ms, timedOut: 32 * ms, want: 64 * ms},
		}},
		{"a call under the doubled bound doubles it again, up to the ceiling", []step{
			{observe: 16 * ms, want: 32 * ms},
			{advance: 100 * ms, timedOut: 32 * ms, want: 64 * ms},
			{advance: 100 * ms, timedOut: 64 * ms, want: 128 * ms},
			{advance: 200 * ms, timedOut: 128 * ms, want: 200 * ms},
		}},
		{"the doubling lasts one to two windows", []step{
			{observe: 1 * ms, want: 20 * ms},
			{advance: 100 * ms, timedOut: 20 * ms, want: 40 * ms},
			{advance: 5000 * ms, observe: 1 * ms, want: 40 * ms},
			{advance: 5000 * ms, observe: 1 * ms, want: 20 * ms},
		}},
		{"a stopped store from idle: 20, 40, 80ms", []step{
			{observe: 1 * ms, want: 20 * ms},
			{advance: 20 * ms, timedOut: 20 * ms, want: 40 * ms},
			{advance: 40 * ms, timedOut: 40 * ms, want: 80 * ms},
			{advance: 80 * ms, timedOut: 80 * ms, want: 160 * ms},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeclock.New(time.Time{})
			a := newAdaptiveTimeout(20*ms, 200*ms)
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

func TestAdaptiveTimeoutStartsAtTheFloor(t *testing.T) {
	if got := newAdaptiveTimeout(20*ms, 200*ms).bound(); got != 20*ms {
		t.Errorf("got %v, want 20ms", got)
	}
	// A ceiling under the floor: no adaptation.
	a := newAdaptiveTimeout(20*ms, 0)
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
