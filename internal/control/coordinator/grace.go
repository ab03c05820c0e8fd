package coordinator

import (
	"time"

	"github.com/weirhq/weir/internal/control/planner"
)

// The planning tick waits, after each interval ends, for the interval's
// reports in flight: the grace. The longest an interval report took to
// arrive over the last delayIntervals intervals, twice over and
// graceMargin more, between minGracePct and planner.DefaultGracePct of an
// interval: a pipeline that delivers in milliseconds is planned on up to 30% of an
// interval sooner than the fixed 40% it had, and estimates follow demand,
// and quota follows the readings, that much sooner (docs/architecture.md,
// "One planning round"); a slow or skewed one is planned on as before. A
// report later than the grace is not lost: the planner counts it as late
// (planner.Ingest). Readings-only reports (sent between interval reports)
// are not waited for and do not count.
const (
	delayIntervals = 8
	graceMargin    = 5 * time.Millisecond
	minGracePct    = 10
)

// reportDelays remembers the longest delay from an interval's end (the
// reporting limiter's clock) to its report's arrival (the coordinator's),
// per interval of arrival over the last delayIntervals intervals. The
// leader's loop owns it.
type reportDelays struct {
	interval time.Duration
	slots    [delayIntervals]struct {
		idx   int64 // the interval of arrival the slot holds; 0 none
		worst time.Duration
	}
}

func newReportDelays(interval time.Duration) *reportDelays {
	return &reportDelays{interval: interval}
}

// observe records a report of the interval ending at end (Unix ms),
// received at. A report that seems to arrive before its interval ended
// comes from a clock ahead of this one and counts as no delay.
func (r *reportDelays) observe(end int64, at time.Time) {
	iv := r.interval.Milliseconds()
	if iv <= 0 {
		return
	}
	delay := max(0, time.Duration(at.UnixMilli()-end)*time.Millisecond)
	idx := at.UnixMilli() / iv
	s := &r.slots[idx%delayIntervals]
	switch {
	case s.idx > idx:
		return // this clock went back: older than what the slot holds
	case s.idx < idx:
		s.idx, s.worst = idx, 0
	}
	s.worst = max(s.worst, delay)
}

// grace returns how long after an interval's end to plan on, at now: twice
// the longest delay of the reports received within the last
// delayIntervals intervals, plus graceMargin, between minGracePct and
// planner.DefaultGracePct of the interval (the planner's own ceiling);
// that ceiling while none was received.
func (r *reportDelays) grace(now time.Time) time.Duration {
	lo, hi := r.interval*minGracePct/100, r.interval*planner.DefaultGracePct/100
	iv := r.interval.Milliseconds()
	if iv <= 0 {
		return hi
	}
	nowIdx := now.UnixMilli() / iv
	worst, seen := time.Duration(0), false
	for _, s := range r.slots {
		if s.idx > nowIdx-delayIntervals && s.idx <= nowIdx {
			worst, seen = max(worst, s.worst), true
		}
	}
	if !seen {
		return hi
	}
	return min(hi, max(lo, 2*worst+graceMargin))
}
