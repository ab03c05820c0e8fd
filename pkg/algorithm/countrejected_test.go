package algorithm_test

import (
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
)

// TestFixedWindowCountRejected replays envoyproxy/ratelimit's counting: the
// cost of a rejected request is counted, so that a window once over its
// limit rejects every later request in it, even one of cost 0.
func TestFixedWindowCountRejected(t *testing.T) {
	base := time.UnixMilli(60_000)
	steps := []struct {
		cost      int64
		at        time.Duration
		allowed   bool
		remaining int64
	}{
		{cost: 5, allowed: true, remaining: 5},
		{cost: 8, allowed: false, remaining: 0}, // counted: 13
		{cost: 1, allowed: false, remaining: 0}, // without counting: allowed
		{cost: 0, allowed: false, remaining: 0}, // 14 > 10 still
		{cost: 3, at: time.Minute, allowed: true, remaining: 7},
	}
	for _, count := range []bool{true, false} {
		p := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 10, Window: time.Minute, CountRejected: count}
		var s algorithm.State
		for i, st := range steps {
			d, next := algorithm.Decide(p, s, base.Add(st.at), st.cost)
			s = next
			if !count {
				continue
			}
			if d.Allowed != st.allowed || d.Remaining != st.remaining {
				t.Errorf("step %d: got allowed %v remaining %d, want %v %d", i, d.Allowed, d.Remaining, st.allowed, st.remaining)
			}
			if !d.Allowed && d.RetryAfter != time.Minute {
				t.Errorf("step %d: got retry-after %v, want the window's end, 1m", i, d.RetryAfter)
			}
		}
		if !count && s.Count != 3 {
			t.Errorf("without CountRejected: got count %d, want 3", s.Count)
		}
	}
}
