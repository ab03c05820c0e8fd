package planner

import (
	"testing"
	"time"
)

// TestReportGrace checks that Tick closes the interval that just ended
// once the grace for reports in flight has passed since its end, and not
// before: 40% of an interval by default, else what SetReportGrace set,
// which is kept within [1 ms, 40%].
func TestReportGrace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		grace  time.Duration // < 0: not set
		at     time.Duration // into the next interval
		closes bool
	}{
		{"default, 15% in", -1, 150 * time.Millisecond, false},
		{"default, 40% in", -1, 400 * time.Millisecond, true},
		{"15%, 10% in", 150 * time.Millisecond, 100 * time.Millisecond, false},
		{"15%, 15% in", 150 * time.Millisecond, 150 * time.Millisecond, true},
		{"above 40% is 40%", 900 * time.Millisecond, 400 * time.Millisecond, true},
		{"0 is 1 ms", 0, time.Millisecond, true},
		{"0 is 1 ms, not at the very end", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(Config{DCs: simDCs, Interval: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			start := time.UnixMilli(1_700_000_000_000) // an interval's start
			p.Load(start, nil, nil, nil)
			if tc.grace >= 0 {
				p.SetReportGrace(tc.grace)
			}
			p.Tick(start.Add(500 * time.Millisecond))
			idx := start.UnixMilli() / 1000
			if p.closed != idx-1 {
				t.Fatalf("first tick closed through %d, want %d", p.closed, idx-1)
			}
			p.Tick(start.Add(time.Second + tc.at))
			if got := p.closed == idx; got != tc.closes {
				t.Errorf("closed through %d at %v into the next interval; want interval %d closed: %v", p.closed, tc.at, idx, tc.closes)
			}
		})
	}
}
