package limiter

import (
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/fakeclock"
)

const ms = time.Millisecond

// The adaptive timeout's arithmetic, worked by hand: srtt and rttvar as
// RFC 6298 updates them (first sample: srtt = d, rttvar = d/2; then
// rttvar += (|srtt-d| - rttvar)/4, srtt += (d - srtt)/8), the bound
// max(srtt + 4·rttvar, floor), doubled per timeout event, at most ceiling.
func TestAdaptiveTimeout(t *testing.T) {
	type step struct {
		observe  time.Duration // a success with this latency, or
		timedOut int           // the start (ms after the origin) of a call that timed out
		advance  time.Duration // clock moves this first
		want     time.Duration
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"idle: the floor", []step{{observe: 1 * ms, want: 20 * ms}, {observe: 1 * ms, want: 20 * ms}}},
		// 16ms: srtt 16, rttvar 8: 48ms.
		{"busy: above the floor", []step{{observe: 16 * ms, want: 48 * ms}}},
		// 16, then 8: rttvar = 8 + (8-8)/4 = 8, srtt = 16 - 1 = 15: 47ms.
		{"second sample", []step{{observe: 16 * ms, want: 48 * ms}, {observe: 8 * ms, want: 47 * ms}}},
		{"ceiling", []step{{observe: 100 * ms, want: 200 * ms}}},
		{"a timeout doubles", []step{
			{observe: 16 * ms, want: 48 * ms},
			{advance: 100 * ms, timedOut: 10, want: 96 * ms},
		}},
		{"calls of one stall double it once", []step{
			{observe: 16 * ms, want: 48 * ms},
			{advance: 100 * ms, timedOut: 10, want: 96 * ms},
			{advance: 1 * ms, timedOut: 20, want: 96 * ms},
			{advance: 1 * ms, timedOut: 90, want: 96 * ms},
		}},
		{"a call started after the last doubling doubles again, up to the ceiling", []step{
			{observe: 16 * ms, want: 48 * ms},
			{advance: 100 * ms, timedOut: 10, want: 96 * ms},
			{advance: 100 * ms, timedOut: 100, want: 192 * ms},
			{advance: 200 * ms, timedOut: 200, want: 200 * ms},
		}},
		{"a success ends the backoff", []step{
			{observe: 16 * ms, want: 48 * ms},
			{advance: 100 * ms, timedOut: 10, want: 96 * ms},
			// rttvar = 8 + (0-8)/4 = 6, srtt = 16: 40ms.
			{observe: 16 * ms, want: 40 * ms},
		}},
		{"a backoff doubles the floor", []step{
			{observe: 1 * ms, want: 20 * ms},
			{advance: 30 * ms, timedOut: 0, want: 40 * ms},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeclock.New(time.Time{})
			origin := c.Now()
			a := newAdaptiveTimeout(20*ms, 200*ms)
			for i, s := range tt.steps {
				c.Advance(s.advance)
				if s.observe > 0 {
					a.observe(s.observe)
				} else {
					a.timedOut(origin.Add(time.Duration(s.timedOut)*ms), c.Now())
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
	a.observe(time.Second)
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
