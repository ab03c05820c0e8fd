package planner

import (
	"slices"
	"time"

	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Load starts a new leader from what etcd holds: the documents (each with
// the revision that last modified it) and the leases. Call it once, after
// SetRules and before the first Tick. Until a DC acknowledges a document's
// revision, the planner assumes the DC may hold any share of it (a former
// leader may have written more since), so nothing grows into it.
func (p *Planner) Load(now time.Time, docs []*weirv1.RuleAssignment, revs []int64, leases []*weirv1.AssignmentLease) {
	for i, doc := range docs {
		p.epoch = max(p.epoch, doc.GetEpoch())
		rs := p.rules[ruleRef{doc.GetDomain(), doc.GetRuleId()}]
		d, ok := p.dcIndex[doc.GetDc()]
		if rs == nil || !ok {
			continue
		}
		load := func(e *entry, share float64) {
			// Until the DC acknowledges rev, it may hold anything.
			e.grant[d], e.target[d] = share, share
			e.hist[d] = []write{{0, 1}, {revs[i], share}}
		}
		rs.hasDoc[d], rs.docEpoch[d] = true, doc.GetEpoch()
		load(rs.entry, doc.GetShare())
		for _, k := range doc.GetKeys() {
			e := rs.keys[k.GetKey()]
			if e == nil {
				if len(rs.keys) >= MaxKeysPerRule || p.entries >= MaxEntries {
					continue
				}
				e = p.newEntry(k.GetKey(), rs.entry.limit)
				for j := range p.dcs {
					e.grant[j], e.target[j], e.hist[j] = rs.entry.grant[j], rs.entry.grant[j], nil
				}
				rs.keys[k.GetKey()] = e
			}
			load(e, k.GetShare())
		}
	}
	// A key listed in some DCs' documents but not others is at the rule's
	// share there; those DCs' grants were copied from the rule above only if
	// the rule's document came first, so copy them again.
	for _, rs := range p.rules {
		for _, e := range rs.keys {
			for d := range p.dcs {
				if e.hist[d] == nil {
					e.grant[d], e.target[d], e.hist[d] = rs.entry.grant[d], rs.entry.grant[d], slices.Clone(rs.entry.hist[d])
				}
			}
		}
	}
	for _, l := range leases {
		p.epoch = max(p.epoch, l.GetEpoch())
		if d, ok := p.dcIndex[l.GetDc()]; ok {
			p.dc[d].leaseUntil = time.UnixMilli(l.GetValidUntilMs())
			if p.dc[d].leaseUntil.After(now) {
				p.dc[d].heardAt = now.Add(p.cfg.TakeoverGrace)
			}
		}
	}
}
