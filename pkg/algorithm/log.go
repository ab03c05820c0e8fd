package algorithm

import "time"

// The sliding window log keeps the time of every admitted unit of cost; an
// entry counts while now < entry + window. It is exact.

// LogView summarises a sliding window log after a decision: what a store
// that keeps the log elsewhere (Redis) returns instead of the whole log.
type LogView struct {
	// Count is the number of entries still in the window.
	Count int64
	// Newest is the Unix ms of the newest entry (0 when Count is 0).
	Newest int64
	// Kth is the Unix ms of the entry, oldest first and counting from 0, at
	// index Count+cost-Limit-1: the one whose expiry lets a rejected request
	// of that cost through. Zero when there is no such entry.
	Kth int64
}

// LogIndex returns the index into the log, oldest first, whose entry's
// expiry would let a rejected request of the given cost through, or -1.
func LogIndex(p Params, count, cost int64) int64 {
	k := count + cost - p.Limit - 1
	if k < 0 || k >= count {
		return -1
	}
	return k
}

// expire drops the entries of log that have left the window at now, in
// place.
func expire(log []int64, now, w int64) []int64 {
	i := 0
	for i < len(log) && log[i] <= now-w {
		i++
	}
	if i == 0 {
		return log
	}
	n := copy(log, log[i:])
	return log[:n]
}

func decideLog(p Params, s State, now, cost int64) (Decision, State) {
	w := p.Window.Milliseconds()
	log := expire(s.Log, now, w)
	allowed := int64(len(log))+cost <= p.Limit
	if allowed && cost > 0 {
		// Entries stay sorted even when this clock is behind the newest.
		at := now
		if n := len(log); n > 0 && log[n-1] > at {
			at = log[n-1]
		}
		for range cost {
			log = append(log, at)
		}
	}
	v := LogView{Count: int64(len(log))}
	if v.Count > 0 {
		v.Newest = log[v.Count-1]
	}
	if k := LogIndex(p, v.Count, cost); !allowed && k >= 0 {
		v.Kth = log[k]
	}
	return DescribeLog(p, v, time.UnixMilli(now), cost, allowed), State{Log: log}
}

// DescribeLog builds the decision for a sliding window log from its view
// after a request of the given cost (already clamped with ClampCost).
func DescribeLog(p Params, v LogView, now time.Time, cost int64, allowed bool) Decision {
	t := now.UnixMilli()
	w := p.Window.Milliseconds()
	d := Decision{Allowed: allowed, Limit: p.Limit, Remaining: max(0, p.Limit-v.Count), Used: v.Count, ResetAt: now}
	if v.Count > 0 {
		d.ResetAt = ms(v.Newest + w)
	}
	if !allowed {
		switch {
		case cost > p.Limit:
			d.RetryAfter = never(p)
		case LogIndex(p, v.Count, cost) >= 0:
			d.RetryAfter = msDuration(max(0, v.Kth+w-t))
		}
	}
	return d
}

func refundLog(p Params, s State, at, now, cost int64) State {
	log := expire(s.Log, now, p.Window.Milliseconds())
	// Remove up to cost entries stamped at, newest first.
	for i := len(log) - 1; i >= 0 && cost > 0; i-- {
		if log[i] == at {
			log = append(log[:i], log[i+1:]...)
			cost--
		}
	}
	return State{Log: log}
}
