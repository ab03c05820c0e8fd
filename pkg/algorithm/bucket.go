package algorithm

// The two buckets share one meter. Level is the bucket's fill in units of
// 1/W tokens (W the window in ms): a request of cost c adds c*W, and every
// millisecond drains Limit. For TokenBucket the fill is the tokens already
// taken (a fresh bucket is full of tokens, so its fill is zero); for
// LeakyBucket it is the water poured in. Both admit a request while the fill
// plus its cost stays within the capacity, which makes them the same meter
// (the leaky bucket as a meter and the token bucket are known to be
// equivalent); they differ in their default capacity, Limit for the token
// bucket and 1 for the leaky bucket, which paces requests instead of letting
// them burst.

// drain returns the fill of s after it leaked until now (ms), and the time of
// the drained state.
func drain(p Params, s State, now int64) (level, last int64) {
	level, last = s.Level, s.Last
	if now <= last {
		// A clock behind the state's (another limiter's) drains nothing.
		return level, last
	}
	elapsed := now - last
	// elapsed*Limit may overflow; compare against the time to empty instead.
	if p.Limit == 0 || elapsed >= ceilDiv(level, p.Limit) {
		if p.Limit == 0 {
			return level, now
		}
		return 0, now
	}
	return level - elapsed*p.Limit, now
}

func decideBucket(p Params, s State, now, cost int64) (Decision, State) {
	w := p.Window.Milliseconds()
	level, last := drain(p, s, now)
	capacity := p.Capacity() * w
	need := cost * w
	allowed := level+need <= capacity
	if allowed {
		level += need
	}
	next := State{Level: level, Last: last}
	return describeBucket(p, next, now, cost, allowed), next
}

// describeBucket builds the decision for a bucket whose state after the
// request is s.
func describeBucket(p Params, s State, now, cost int64, allowed bool) Decision {
	w := p.Window.Milliseconds()
	c := p.Capacity()
	d := Decision{Allowed: allowed, Limit: c, Remaining: (c*w - s.Level) / w, Used: ceilDiv(s.Level, w), ResetAt: ms(now)}
	if p.Limit > 0 {
		d.ResetAt = ms(max(now, s.Last) + ceilDiv(s.Level, p.Limit))
	}
	if !allowed {
		if cost > c || p.Limit == 0 {
			d.RetryAfter = never(p)
		} else {
			// The fill must drop to capacity - need.
			excess := s.Level + cost*w - c*w
			d.RetryAfter = msDuration(max(s.Last, now) - now + ceilDiv(excess, p.Limit))
		}
	}
	return d
}

// refundBucket gives back what is left of a request of cost admitted at
// time at: its cost less what the bucket has drained since, so a refund
// never returns more than the request still holds.
func refundBucket(p Params, s State, at, now, cost int64) State {
	level, last := drain(p, s, now)
	give := cost * p.Window.Milliseconds()
	if elapsed := now - at; elapsed > 0 && p.Limit > 0 {
		if elapsed >= ceilDiv(give, p.Limit) {
			give = 0
		} else {
			give -= elapsed * p.Limit
		}
	}
	return State{Level: max(0, level-give), Last: last}
}
