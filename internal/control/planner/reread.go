package planner

import (
	"github.com/weirhq/weir/pkg/allocate"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Readings between intervals. A DC the demand left holds what it
// consumed, which leaves the window as its admissions age; the DC the
// demand went to grows into it a reading later. Interval reports read it
// at each interval's end, so quota freed early in an interval waited for
// that reading and the tick after it. The limiters also read the entries
// they hold quota of while quiet a few times between interval reports and
// send those readings alone (UsageReport.readings_only). When such a
// reading frees quota the DC held beyond its limits, the entry is queued,
// and the next Plan — which the coordinator runs soon after (Rereads) —
// adds what it freed to the targets, apportioned by the shares of the
// last tick. Targets only grow between ticks: goals the two-phase step
// reaches only as far as no DC may still hold the quota, so the safety
// argument is the same; the next tick sets them all from the readings at
// hand and empties the queue.

// rereadEntry is an entry queued by a reading that freed quota, and its
// rule as it was then.
type rereadEntry struct {
	rs *ruleState
	e  *entry
}

// ingestReadings takes the readings of DC d's readings-only report r; its
// counts, were there any, are not counted. Only entries the planner
// knows, of rules whose memory makes them usage-aware, are read.
func (p *Planner) ingestReadings(r *weirv1.UsageReport, d int) {
	readAt := r.GetIntervalStartMs() + r.GetIntervalMs()
	rev := r.GetAppliedRevision()
	for _, ru := range r.GetRules() {
		rs := p.rules[ruleRef{ru.GetDomain(), ru.GetRuleId()}]
		if rs == nil {
			p.stats.UnknownRules++
			continue
		}
		if rs.memory <= p.cfg.UsageAwareAbove {
			continue
		}
		if ru.Consumed != nil && len(rs.spec.KeyType) == 0 {
			p.observeBetween(rs, rs.entry, d, ru.GetConsumed(), rev, readAt)
		}
		for _, k := range ru.GetKeys() {
			if e := rs.keys[k.GetKey()]; e != nil && k.Consumed != nil {
				p.observeBetween(rs, e, d, k.GetConsumed(), rev, readAt)
			}
		}
	}
}

// observeBetween records DC d's reading v of e between intervals and, for
// a congested entry whose targets are usage-aware, what it freed since
// the last tick (or took back, read higher), queuing e. Only what d
// consumed beyond the limits it may enforce comes free: quota under them
// is still d's, to admit again as its own admissions leave the window.
func (p *Planner) observeBetween(rs *ruleState, e *entry, d int, v, rev, readAt int64) {
	since := p.agedOut(rs)
	limits := e.limits(d)
	before := max(limits, e.consumed(d, since))
	e.observe(d, v, rev, readAt, p.cfg.Skew, p.dc[d].witnesses)
	freed := before - max(limits, e.consumed(d, since))
	if !e.aware || !e.congested || freed == 0 {
		return
	}
	// A reading that rose takes back what another freed.
	e.freed += freed
	if !e.reread {
		e.reread = true
		p.rereads = append(p.rereads, rereadEntry{rs, e})
	}
}

// Rereads reports whether readings between intervals freed quota since
// the last Plan: a round now would grow into it.
func (p *Planner) Rereads() bool {
	for _, q := range p.rereads {
		if q.e.freed > 0 {
			return true
		}
	}
	return false
}

// dropRereads empties the queue.
func (p *Planner) dropRereads() {
	for i, q := range p.rereads {
		p.rereads[i] = rereadEntry{}
		q.e.reread, q.e.freed = false, 0
	}
	p.rereads = p.rereads[:0]
}

// retargetRereads adds to the targets of each queued entry what its
// readings between intervals freed since the last tick, apportioned by
// the shares of that tick, and empties the queue. An entry whose rule
// was replaced or dropped, or a key retired since, is left as it is.
// (Setting the targets again from every reading at hand, never lower, did
// worse in long-window-60: docs/architecture.md, "Long windows".)
func (p *Planner) retargetRereads() {
	var buf [allocate.MaxStackDCs]int64
	add := buf[:len(p.dcs)]
	for _, q := range p.rereads {
		e := q.e
		if p.rules[q.rs.ref] != q.rs || e != q.rs.entry && q.rs.keys[e.key] != e || !e.aware || e.freed <= 0 {
			continue
		}
		allocate.Apportion(e.share, min(e.freed, e.limit), add)
		for d, a := range add {
			e.target[d] = min(e.limit, e.target[d]+a)
		}
	}
	p.dropRereads()
}
