package breaker_test

import (
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/pkg/breaker"
)

func TestBreaker(t *testing.T) {
	c := fakeclock.New(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	var changes []breaker.State
	b, err := breaker.New(breaker.Config{Failures: 2, Cooldown: time.Second, Now: c.Now}, func(s breaker.State) { changes = append(changes, s) })
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name      string
		advance   time.Duration
		do        string // "allow", "ok", "fail"
		wantOK    bool
		wantProbe bool
		wantState breaker.State
	}{
		{"closed allows", 0, "allow", true, false, breaker.Closed},
		{"one failure stays closed", 0, "fail", false, false, breaker.Closed},
		{"success resets the streak", 0, "ok", false, false, breaker.Closed},
		{"failure 1", 0, "fail", false, false, breaker.Closed},
		{"failure 2 opens", 0, "fail", false, false, breaker.Open},
		{"open refuses", 999 * time.Millisecond, "allow", false, false, breaker.Open},
		{"cooldown over: one probe", time.Millisecond, "allow", true, true, breaker.HalfOpen},
		{"second caller refused while probing", 0, "allow", false, false, breaker.HalfOpen},
		{"probe fails: open again", 0, "fail", false, false, breaker.Open},
		{"still cooling down", 500 * time.Millisecond, "allow", false, false, breaker.Open},
		{"next probe", 500 * time.Millisecond, "allow", true, true, breaker.HalfOpen},
		{"probe succeeds: closed", 0, "ok", false, false, breaker.Closed},
		{"closed allows again", 0, "allow", true, false, breaker.Closed},
	}
	for _, s := range steps {
		c.Advance(s.advance)
		switch s.do {
		case "allow":
			ok, probe := b.Allow()
			if ok != s.wantOK || probe != s.wantProbe {
				t.Errorf("%s: got ok=%v probe=%v, want ok=%v probe=%v", s.name, ok, probe, s.wantOK, s.wantProbe)
			}
		case "ok":
			b.Success()
		case "fail":
			b.Failure()
		}
		if got := b.State(); got != s.wantState {
			t.Errorf("%s: got state %v, want %v", s.name, got, s.wantState)
		}
	}
	want := []breaker.State{breaker.Open, breaker.HalfOpen, breaker.Open, breaker.HalfOpen, breaker.Closed}
	if len(changes) != len(want) {
		t.Fatalf("got changes %v, want %v", changes, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Fatalf("got changes %v, want %v", changes, want)
		}
	}
}

func TestReleaseLetsTheNextCallerProbe(t *testing.T) {
	c := fakeclock.New(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	b, _ := breaker.New(breaker.Config{Failures: 1, Cooldown: time.Second, Now: c.Now}, nil)
	b.Failure()
	c.Advance(time.Second)
	if ok, probe := b.Allow(); !ok || !probe {
		t.Fatalf("after cooldown: got ok=%v probe=%v, want a probe", ok, probe)
	}
	b.Release()
	if ok, probe := b.Allow(); !ok || !probe {
		t.Fatalf("after Release: got ok=%v probe=%v, want another probe at once", ok, probe)
	}
	b.Success()
	b.Release() // closed: nothing to release
	if got := b.State(); got != breaker.Closed {
		t.Fatalf("Release on a closed breaker: got %v, want closed", got)
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := breaker.New(breaker.Config{Failures: -1}, nil); err == nil {
		t.Error("negative Failures: got nil error")
	}
}

// TestFailureOfCountsEventsNotCallers: calls that were already in flight
// when a failure was counted failed in the same event (one stall shared by
// every caller) and do not count again; only calls started after it do.
func TestFailureOfCountsEventsNotCallers(t *testing.T) {
	tests := []struct {
		name string
		// starts are the calls' start times, in ms after the clock's
		// origin; each fails at its start + 20ms, in order.
		starts    []int
		wantState breaker.State
	}{
		{"50 callers stuck in one stall", repeat(0, 50), breaker.Closed},
		{"two stalls", []int{0, 0, 0, 25, 25}, breaker.Closed},
		{"three calls each started after the last failure", []int{0, 20, 40}, breaker.Open},
		{"a dead dependency under concurrency", []int{0, 0, 1, 20, 21, 22, 40}, breaker.Open},
		{"started at the instant of the last failure counts", []int{0, 20, 40}, breaker.Open},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			origin := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
			c := fakeclock.New(origin)
			b, _ := breaker.New(breaker.Config{Failures: 3, Cooldown: time.Second, Now: c.Now}, nil)
			for _, s := range tt.starts {
				start := origin.Add(time.Duration(s) * time.Millisecond)
				if end := start.Add(20 * time.Millisecond); end.After(c.Now()) {
					c.Set(end)
				}
				b.FailureOf(start)
			}
			if got := b.State(); got != tt.wantState {
				t.Errorf("got %v, want %v", got, tt.wantState)
			}
		})
	}
}

func TestFailureOfAProbeReopens(t *testing.T) {
	c := fakeclock.New(time.Time{})
	b, _ := breaker.New(breaker.Config{Failures: 1, Cooldown: time.Second, Now: c.Now}, nil)
	b.Failure()
	c.Advance(time.Second)
	if _, probe := b.Allow(); !probe {
		t.Fatal("after cooldown: got no probe")
	}
	b.FailureOf(time.Time{}) // started long before the last failure
	if got := b.State(); got != breaker.Open {
		t.Errorf("failed probe: got %v, want open", got)
	}
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}
