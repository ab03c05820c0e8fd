package planner

import (
	"fmt"
	"slices"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Ingest accounts for one usage report received at now. A refused report
// changes nothing and returns an error wrapping ErrReport; a duplicate
// returns nil and changes nothing.
func (p *Planner) Ingest(r *weirv1.UsageReport, now time.Time) error {
	d, ok := p.dcIndex[r.GetDc()]
	switch {
	case !ok:
		return p.refuse("unknown DC %q", r.GetDc())
	case r.GetInstance() == "" || len(r.GetInstance()) > 256:
		return p.refuse("instance id of %d bytes", len(r.GetInstance()))
	case r.GetSequence() == 0:
		return p.refuse("sequence 0")
	case r.GetIntervalMs() <= 0 || r.GetIntervalMs() > 3600_000:
		return p.refuse("interval of %d ms", r.GetIntervalMs())
	case r.GetReadingsOnly() && r.GetIntervalMs() > p.intervalMs:
		// Read within the interval it names: a later time would release
		// carried writes early and overtake the readings to come.
		return p.refuse("readings-only report read %d ms into its interval of %d", r.GetIntervalMs(), p.intervalMs)
	case r.GetIntervalStartMs() < 0:
		// Interval indices index rings by their remainder: a negative one
		// would index out of them.
		return p.refuse("interval starting at %d ms, before 1970", r.GetIntervalStartMs())
	}
	idx := r.GetIntervalStartMs() / p.intervalMs
	nowIdx := now.UnixMilli() / p.intervalMs
	if skew := p.cfg.Skew.Milliseconds()/p.intervalMs + 1; idx > nowIdx+skew {
		return p.refuse("interval starting %d ms from now", r.GetIntervalStartMs()-now.UnixMilli())
	}
	if p.duplicate(r.GetInstance(), r.GetSequence(), nowIdx) {
		p.stats.Duplicates++
		return nil
	}
	ds := &p.dc[d]
	ds.heardAt = now
	if r.GetReadingsOnly() {
		p.stats.Readings++
		p.ingestReadings(r, d)
		return nil
	}
	p.stats.Reports++
	// Reports of intervals already closed still prove the DC alive and
	// count in the statistics. When reports lag (Kafka behind, a consumer
	// catching up) every report may come after its interval closed: late
	// reports are summed per interval, and the newest late interval whose
	// reports have had lateSettle to gather (the DC's other instances, a
	// report split in parts) stands in for the DC in the next interval to
	// close, unless the estimates have seen a later interval of the DC.
	// So estimates follow lagging demand a few intervals behind instead of
	// freezing.
	late := idx <= p.closed && p.started >= 0
	stale := false
	switch {
	case !late:
		ds.heard[idx%heardLen] = idx
	case idx <= ds.observed:
		p.stats.LateReports++
		stale = true
	default:
		p.stats.LateReports++
		ds.lateAt = now
		switch l := &ds.late[idx%2]; {
		case l.idx < idx:
			*l = lateInterval{idx: idx, first: now}
		case l.idx > idx:
			stale = true // two newer late intervals are already gathering
		}
	}
	scale := float64(p.intervalMs) / float64(r.GetIntervalMs())
	readAt := r.GetIntervalStartMs() + r.GetIntervalMs() // readings are taken when the interval ends
	for _, ru := range r.GetRules() {
		ref := ruleRef{ru.GetDomain(), ru.GetRuleId()}
		rs := p.rules[ref]
		if rs == nil {
			p.stats.UnknownRules++
			continue
		}
		if !countsOK(ru.GetOffered(), ru.GetAdmitted(), ru.GetRejected()) {
			p.stats.Refused++
			continue
		}
		p.usage.add(ref, r.GetDc(), idx, ru, now)
		aware := rs.memory > p.cfg.UsageAwareAbove
		if aware && ru.Consumed != nil && len(rs.spec.KeyType) == 0 {
			rs.entry.observe(d, ru.GetConsumed(), r.GetAppliedRevision(), readAt, p.cfg.Skew, p.dc[d].witnesses)
		}
		if stale {
			continue
		}
		put := add
		if late {
			put = addLate
		}
		window := rs.windowMs(idx * p.intervalMs)
		put(rs.entry, d, idx, p.fraction(float64(ru.GetOffered())*scale, rs.entry.limit, window))
		for _, k := range ru.GetKeys() {
			p.ingestKey(rs, d, idx, k, scale, window, put)
			if e := rs.keys[k.GetKey()]; aware && e != nil && k.Consumed != nil {
				e.observe(d, k.GetConsumed(), r.GetAppliedRevision(), readAt, p.cfg.Skew, p.dc[d].witnesses)
			}
		}
	}
	return nil
}

// ingestKey accounts for key usage k of rs in DC d's report of interval
// idx; window is rs.windowMs of the interval.
func (p *Planner) ingestKey(rs *ruleState, d int, idx int64, k *weirv1.KeyUsage, scale float64, window int64, put func(*entry, int, int64, float64)) {
	key, limit := k.GetKey(), k.GetLimit()
	if limit == 0 && k.GetOffered() == 0 && k.GetAdmitted() == 0 && k.GetRejected() == 0 && k.Consumed != nil {
		return // a quiet key's reading alone (usage/holding.go): no demand, the limit as it was
	}
	if key == "" || len(key) > MaxKeyLen || limit <= 0 || limit > algorithm.MaxLimit || !countsOK(k.GetOffered(), k.GetAdmitted(), k.GetRejected()) {
		p.stats.Refused++
		return
	}
	f := p.fraction(float64(k.GetOffered())*scale, limit, window)
	e := rs.keys[key]
	if e == nil {
		// A key earns a share of its own when it uses at least half of
		// what the rule's share gives it here, or is rejected.
		if (f < rs.entry.frac(rs.entry.grant[d])/2 && k.GetRejected() == 0) || len(rs.keys) >= MaxKeysPerRule || p.entries >= MaxEntries {
			p.stats.KeysUntracked++
			return
		}
		e = p.newKeyEntry(rs, key, limit)
		rs.keys[key] = e
	}
	p.setLimit(rs, e, limit)
	put(e, d, idx, f)
}

// fraction converts an offered count per interval into a fraction of what
// limit renews per interval, over windows of windowMs (rs.windowMs).
func (p *Planner) fraction(offered float64, limit, windowMs int64) float64 {
	per := p.perInterval(limit, windowMs)
	if per <= 0 {
		return 0
	}
	return offered / per
}

// perInterval is what limit renews per interval over windows of windowMs:
// the units an estimate of 1 asks an interval. 0 for a limit or window
// that is not positive.
func (p *Planner) perInterval(limit, windowMs int64) float64 {
	if limit <= 0 || windowMs <= 0 {
		return 0
	}
	return float64(limit) * float64(p.intervalMs) / float64(windowMs)
}

// windowMs is the length of rs's window that holds Unix ms t: its
// WindowSeconds, or for calendar months that month's own length (28 to 31
// days), so that a demand is a fraction of what the limit renews in the
// month it comes in. (With 31 days, a February at 91% of its quota's rate
// would count as asking for all of it.)
func (rs *ruleState) windowMs(t int64) int64 {
	if rs.spec.Calendar == "" {
		return rs.spec.WindowSeconds * 1000
	}
	start, end := rs.spec.Params(rs.spec.Limit, rs.spec.Burst).WindowBounds(time.UnixMilli(t))
	return end.Sub(start).Milliseconds()
}

func add(e *entry, d int, idx int64, f float64) {
	slot := &e.pend[d][idx%ring]
	if slot.idx != idx {
		*slot = pending{idx: idx}
	}
	slot.sum += f
}

// addLate adds f, from a late report of interval idx, to the entry's late
// sum of that interval for DC d.
func addLate(e *entry, d int, idx int64, f float64) {
	l := &e.late[d][idx%2]
	switch {
	case idx > l.idx:
		*l = pending{idx: idx, sum: f}
	case idx == l.idx:
		l.sum += f
	}
}

func countsOK(offered, admitted, rejected uint64) bool {
	return offered <= maxCount && admitted <= offered && rejected <= offered && admitted+rejected <= offered+offered/100+1
}

func (p *Planner) refuse(format string, args ...any) error {
	p.stats.Refused++
	return fmt.Errorf("%w: %s", ErrReport, fmt.Sprintf(format, args...))
}

// duplicate reports whether (instance, seq) was seen, remembering it. It
// remembers the last 64 sequences of each instance; older ones count as
// duplicates.
func (p *Planner) duplicate(instance string, seq uint64, nowIdx int64) bool {
	w := p.seqs[instance]
	if w == nil {
		if len(p.seqs) >= MaxInstances {
			p.forgetInstances(nowIdx)
		}
		w = &seqWindow{}
		p.seqs[instance] = w
	}
	w.seen = nowIdx
	switch {
	case seq > w.max:
		shift := seq - w.max
		if shift >= 64 {
			w.bits = 0
		} else {
			w.bits <<= shift
		}
		w.bits |= 1
		w.max = seq
		return false
	case w.max-seq >= 64:
		return true
	default:
		bit := uint64(1) << (w.max - seq)
		if w.bits&bit != 0 {
			return true
		}
		w.bits |= bit
		return false
	}
}

// forgetInstances drops the instances not heard from for an hour, or the
// oldest half when none is that old.
func (p *Planner) forgetInstances(nowIdx int64) {
	hour := int64(time.Hour/time.Millisecond) / p.intervalMs
	for k, w := range p.seqs {
		if nowIdx-w.seen > hour {
			delete(p.seqs, k)
		}
	}
	if len(p.seqs) < MaxInstances {
		return
	}
	seen := make([]int64, 0, len(p.seqs))
	for _, w := range p.seqs {
		seen = append(seen, w.seen)
	}
	slices.Sort(seen)
	cut := seen[len(seen)/2]
	for k, w := range p.seqs {
		if w.seen <= cut {
			delete(p.seqs, k)
		}
	}
}

type pending struct {
	idx int64
	sum float64
}

type seqWindow struct {
	max  uint64
	bits uint64 // bit i: max-i seen
	seen int64  // interval of the last report
}

// newKeyEntry returns a new entry for key, of global limit limit, at what
// each DC enforces for the key until the key's own limits are written:
// the rule's, scaled to the key's limit (rule.LocalLimit).
func (p *Planner) newKeyEntry(rs *ruleState, key string, limit int64) *entry {
	e := p.newEntry(rs, key, limit)
	scale := func(v int64) int64 { return rule.LocalLimit(v, rs.entry.limit, 0, limit) }
	for i := range p.dcs {
		e.grant[i], e.target[i] = scale(rs.entry.grant[i]), scale(rs.entry.grant[i])
		e.share[i] = e.frac(e.target[i])
		h := slices.Clone(rs.entry.hist[i])
		for j := range h {
			h[j].limit = scale(h[j].limit)
		}
		e.hist[i] = h
		// The rule's carried writes too: the key may have consumed up to
		// them under the rule's limits (an unread entry's are all the
		// leader knows of it), until the DC's readings of the key say
		// otherwise or they age out.
		c := slices.Clone(rs.entry.carry[i])
		for j := range c {
			c[j].v = scale(c[j].v)
		}
		e.carry[i] = c
	}
	return e
}
