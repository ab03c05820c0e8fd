package algorithm

import "math"

// Fixed windows start at multiples of the window length since the Unix
// epoch. A state whose window is later than now's (another limiter's clock
// runs ahead) keeps counting into that later window, which errs on the side
// of rejecting.

func decideFixed(p Params, s State, now, cost int64) (Decision, State) {
	start, _ := p.bounds(now)
	next := State{Window: start}
	if s.Window >= start {
		next = State{Window: s.Window, Count: s.Count}
	}
	allowed := next.Count+cost <= p.Limit
	if allowed || p.CountRejected {
		next.Count += cost
	}
	return describeFixed(p, next, now, cost, allowed), next
}

func describeFixed(p Params, s State, now, cost int64, allowed bool) Decision {
	_, end := p.bounds(s.Window)
	d := Decision{Allowed: allowed, Limit: p.Limit, Remaining: max(0, p.Limit-s.Count), Used: s.Count, ResetAt: ms(now)}
	if s.Count > 0 {
		d.ResetAt = ms(end)
	}
	if !allowed {
		if cost > p.Limit && !p.CountRejected {
			d.RetryAfter = never(p)
		} else {
			d.RetryAfter = msDuration(end - now)
		}
	}
	return d
}

func refundFixed(p Params, s State, at, now, cost int64) State {
	if start, _ := p.bounds(at); s.Window == start {
		s.Count = max(0, s.Count-cost)
	}
	return s
}

// The sliding window counter estimates the cost admitted in the last window
// as the current fixed window's count plus the previous one's weighted by
// how much of it the sliding window still covers, rounded up.

// rollCounter moves s to the fixed window holding now.
func rollCounter(p Params, s State, now int64) State {
	w := p.Window.Milliseconds()
	start := windowStart(now, w)
	switch {
	case s.Window >= start:
		return State{Window: s.Window, Count: s.Count, Prev: s.Prev}
	case s.Window == start-w:
		return State{Window: start, Prev: s.Count}
	default:
		return State{Window: start}
	}
}

// weighted returns ceil(prev * (w - elapsed) / w) computed in float64 as the
// Lua script computes it (a multiplication, then a division, then a ceiling:
// identical IEEE operations in both). elapsed is clamped to [0, w].
func weighted(prev, elapsed, w int64) int64 {
	if prev == 0 {
		return 0
	}
	elapsed = min(max(elapsed, 0), w)
	x := float64(prev) * float64(w-elapsed)
	return int64(math.Ceil(x / float64(w)))
}

func decideCounter(p Params, s State, now, cost int64) (Decision, State) {
	next := rollCounter(p, s, now)
	est := weighted(next.Prev, now-next.Window, p.Window.Milliseconds()) + next.Count
	allowed := est+cost <= p.Limit
	if allowed {
		next.Count += cost
	}
	return describeCounter(p, next, now, cost, allowed), next
}

func describeCounter(p Params, s State, now, cost int64, allowed bool) Decision {
	w := p.Window.Milliseconds()
	est := weighted(s.Prev, now-s.Window, w) + s.Count
	d := Decision{Allowed: allowed, Limit: p.Limit, Remaining: max(0, p.Limit-est), Used: est, ResetAt: ms(now)}
	switch {
	case s.Count > 0:
		d.ResetAt = ms(s.Window + 2*w)
	case s.Prev > 0:
		d.ResetAt = ms(s.Window + w)
	}
	if !allowed {
		d.RetryAfter = msDuration(counterRetry(p, s, now, cost))
	}
	return d
}

// counterRetry returns how many ms until a request of the given cost would
// pass, assuming no other traffic.
func counterRetry(p Params, s State, now, cost int64) int64 {
	w := p.Window.Milliseconds()
	if cost > p.Limit {
		return w
	}
	// The first instant at offset >= from into a window whose fixed count is
	// cur and whose previous window held prev at which
	// ceil(prev*(w-o)/w) + cur + cost <= limit; ok=false if none.
	first := func(prev, cur, from int64) (int64, bool) {
		room := p.Limit - cur - cost
		if room < 0 {
			return 0, false
		}
		if prev <= room {
			return from, true
		}
		// ceil(prev*(w-o)/w) <= room  <=>  o >= w - room*w/prev.
		o := w - int64(math.Floor(float64(room)*float64(w)/float64(prev)))
		// Float rounding may be off by one either way: step to the exact
		// first offset.
		for o > from && weighted(prev, o-1, w) <= room {
			o--
		}
		for o < w && weighted(prev, o, w) > room {
			o++
		}
		return max(o, from), true
	}
	if o, ok := first(s.Prev, s.Count, now-s.Window); ok {
		return max(0, s.Window+o-now)
	}
	if o, ok := first(s.Count, 0, 0); ok {
		return s.Window + w + o - now
	}
	return s.Window + 2*w - now
}

func refundCounter(p Params, s State, at, now, cost int64) State {
	w := p.Window.Milliseconds()
	s = rollCounter(p, s, now)
	switch windowStart(at, w) {
	case s.Window:
		s.Count = max(0, s.Count-cost)
	case s.Window - w:
		s.Prev = max(0, s.Prev-cost)
	}
	return s
}
