package coordinator

import (
	"testing"
	"time"
)

// TestReportDelaysGrace checks the planning tick's wait for reports in
// flight: twice the longest delay of the last delayIntervals intervals
// plus graceMargin, within 10% and 40% of the interval.
func TestReportDelaysGrace(t *testing.T) {
	const iv = 200 * time.Millisecond
	start := time.UnixMilli(1_700_000_000_000) // an interval's start
	type report struct {
		end     int   // the reported interval's end, in intervals from start
		delayMs int64 // its arrival after that end; negative: a clock ahead
	}
	for _, tc := range []struct {
		name    string
		reports []report
		now     int // intervals from start
		want    time.Duration
	}{
		{"none yet", nil, 3, 80 * time.Millisecond},
		{"fast pipeline: the floor", []report{{1, 3}, {2, 4}}, 3, 20 * time.Millisecond},
		{"twice the worst and the margin", []report{{1, 10}, {2, 20}, {2, 5}}, 3, 45 * time.Millisecond},
		{"slow: the ceiling", []report{{2, 60}}, 3, 80 * time.Millisecond},
		{"a clock ahead counts as no delay", []report{{2, -50}}, 3, 20 * time.Millisecond},
		{"a slow report ages out", []report{{1, 60}, {9, 10}}, 10, 25 * time.Millisecond},
		{"nothing received lately: the ceiling", []report{{1, 10}}, 12, 80 * time.Millisecond},
		{"a report of long ago, received now", []report{{1, 2000}}, 11, 80 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReportDelays(iv)
			for _, rep := range tc.reports {
				end := start.Add(time.Duration(rep.end) * iv)
				r.observe(end.UnixMilli(), end.Add(time.Duration(rep.delayMs)*time.Millisecond))
			}
			if got := r.grace(start.Add(time.Duration(tc.now) * iv)); got != tc.want {
				t.Errorf("grace %v, want %v", got, tc.want)
			}
		})
	}
}

// TestUntilTick checks when the next planning tick comes: grace into the
// interval, or into the next one once that is past.
func TestUntilTick(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		at, grace, want time.Duration
	}{
		{0, 80 * time.Millisecond, 80 * time.Millisecond},
		{50 * time.Millisecond, 20 * time.Millisecond, 170 * time.Millisecond},
		{20 * time.Millisecond, 20 * time.Millisecond, 200 * time.Millisecond},
		{100 * time.Millisecond, 80 * time.Millisecond, 180 * time.Millisecond},
	} {
		if got := untilTick(start.Add(tc.at), 200*time.Millisecond, tc.grace); got != tc.want {
			t.Errorf("untilTick at %v with grace %v = %v, want %v", tc.at, tc.grace, got, tc.want)
		}
	}
}
