package logthrottle_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/pkg/logthrottle"
)

// step is one call of Allow after the clock moved by advance.
type step struct {
	advance time.Duration
	key     string // Keyed only
	ok      bool
	held    int64
}

func TestThrottle(t *testing.T) {
	steps := []step{
		{ok: true}, // the first line at once
		{},
		{advance: 59 * time.Second},
		{advance: time.Second, ok: true, held: 2}, // a period after the first
		{advance: 30 * time.Second},
		{advance: 30 * time.Second, ok: true, held: 1},
		{advance: time.Hour, ok: true}, // nothing held back since
	}
	clock := fakeclock.New(time.Time{})
	th := logthrottle.New(time.Minute, clock.Now)
	for i, s := range steps {
		clock.Advance(s.advance)
		held, ok := th.Allow()
		if ok != s.ok || held != s.held {
			t.Fatalf("step %d: Allow() = %d, %v; want %d, %v", i, held, ok, s.held, s.ok)
		}
	}
}

func TestKeyed(t *testing.T) {
	steps := []step{
		{key: "a", ok: true},
		{key: "a"},
		{key: "b", ok: true},             // another key: its own line
		{key: "c", ok: true},             // past two keys, neither forgettable: the shared rest's first
		{advance: time.Second, key: "d"}, // the rest's: held back
		{advance: time.Minute, key: "a", ok: true, held: 1},
		{key: "e", ok: true},          // b's period passed with nothing held: forgotten for e
		{key: "b", ok: true, held: 1}, // forgotten, and a and e are not: the rest's, d held back
		{key: "e"},
	}
	clock := fakeclock.New(time.Time{})
	k := logthrottle.NewKeyed(time.Minute, 2, clock.Now)
	for i, s := range steps {
		clock.Advance(s.advance)
		held, ok := k.Allow(s.key)
		if ok != s.ok || held != s.held {
			t.Fatalf("step %d (%s): Allow() = %d, %v; want %d, %v", i, s.key, held, ok, s.held, s.ok)
		}
	}
}

// TestConcurrentFlood: of a flood of events from many goroutines, one
// line per period is let through, and every event is either a line or
// counted in one.
func TestConcurrentFlood(t *testing.T) {
	cases := []struct {
		name string
		make func(now func() time.Time) func() (int64, bool)
	}{
		{"Throttle", func(now func() time.Time) func() (int64, bool) {
			return logthrottle.New(time.Second, now).Allow
		}},
		{"Keyed", func(now func() time.Time) func() (int64, bool) {
			k := logthrottle.NewKeyed(time.Second, 4, now)
			return func() (int64, bool) { return k.Allow("k") }
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := fakeclock.New(time.Time{})
			allow := c.make(clock.Now)
			const goroutines, events, periods = 8, 500, 4
			var lines, reported atomic.Int64
			for p := range periods {
				var wg sync.WaitGroup
				for range goroutines {
					wg.Go(func() {
						for range events {
							if held, ok := allow(); ok {
								lines.Add(1)
								reported.Add(1 + held)
							}
						}
					})
				}
				wg.Wait()
				if got := lines.Load(); got != int64(p+1) {
					t.Fatalf("period %d: %d lines, want %d", p, got, p+1)
				}
				clock.Advance(time.Second)
			}
			// The last period's held-back events are reported by the next line.
			held, ok := allow()
			if !ok {
				t.Fatal("no line after the last period")
			}
			if got, want := reported.Load()+held+1, int64(periods*goroutines*events+1); got != want {
				t.Fatalf("%d events reported, want %d", got, want)
			}
		})
	}
}

func ExampleThrottle() {
	clock := fakeclock.New(time.Time{})
	skipped := logthrottle.New(time.Minute, clock.Now)
	for i := range 5 {
		if held, ok := skipped.Allow(); ok {
			fmt.Println("message", i, "skipped; held back since the last line:", held)
		}
		clock.Advance(20 * time.Second)
	}
	// Output:
	// message 0 skipped; held back since the last line: 0
	// message 3 skipped; held back since the last line: 2
}
