package planner

import (
	"slices"
	"time"

	"github.com/weirhq/weir/pkg/rule"

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
		load := func(e *entry, local int64) {
			// Until the DC acknowledges rev, it may hold anything.
			e.grant[d], e.target[d] = local, local
			e.share[d] = e.frac(local)
			e.hist[d] = []write{{0, e.limit}, {revs[i], local}}
		}
		rs.hasDoc[d], rs.docEpoch[d] = true, doc.GetEpoch()
		load(rs.entry, rule.LocalLimit(doc.GetLimit(), doc.GetGlobalLimit(), doc.GetShare(), rs.entry.limit))
		for _, k := range doc.GetKeys() {
			e := rs.keys[k.GetKey()]
			if e == nil {
				if len(rs.keys) >= MaxKeysPerRule || p.entries >= MaxEntries {
					continue
				}
				limit := k.GetGlobalLimit()
				if limit <= 0 {
					limit = rs.entry.limit // until the DCs report the key's own
				}
				e = p.newEntry(rs, k.GetKey(), limit)
				for j := range p.dcs {
					e.hist[j] = nil
				}
				rs.keys[k.GetKey()] = e
			}
			load(e, rule.LocalLimit(k.GetLimit(), k.GetGlobalLimit(), k.GetShare(), e.limit))
		}
	}
	// A key listed in some DCs' documents but not others is at the rule's
	// share there; those DCs' grants were copied from the rule above only if
	// the rule's document came first, so copy them again.
	for _, rs := range p.rules {
		for _, e := range rs.keys {
			for d := range p.dcs {
				if e.hist[d] == nil {
					scale := func(v int64) int64 { return rule.LocalLimit(v, rs.entry.limit, 0, e.limit) }
					e.grant[d], e.target[d] = scale(rs.entry.grant[d]), scale(rs.entry.grant[d])
					e.share[d] = e.frac(e.target[d])
					h := slices.Clone(rs.entry.hist[d])
					for j := range h {
						h[j].limit = scale(h[j].limit)
					}
					e.hist[d] = h
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
