package planner

import (
	"fmt"

	"github.com/weirhq/weir/pkg/allocate"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/sharepolicy"
)

// SetRules sets the global rules to plan for; rules that are not global or
// not enabled are ignored. A rule dropped from the set keeps its documents
// in etcd until it returns (the limiters no longer match it).
func (p *Planner) SetRules(rules []rule.Rule) {
	keep := map[ruleRef]bool{}
	for _, r := range rules {
		if r.Scope != rule.ScopeGlobal || !r.Enabled || r.Unlimited {
			continue
		}
		ref := ruleRef{r.Domain, r.ID}
		keep[ref] = true
		rs := p.rules[ref]
		if rs == nil {
			if p.entries >= MaxEntries {
				continue
			}
			rs = &ruleState{ref: ref, keys: map[string]*entry{}, spec: r,
				dirty: make([]bool, len(p.dcs)), hasDoc: make([]bool, len(p.dcs)), docEpoch: make([]uint64, len(p.dcs)),
				policy: make([]allocate.DC, len(p.dcs))}
			rs.entry = p.newEntry(rs, "", r.Limit)
			p.rules[ref] = rs
		}
		rs.spec = r
		rs.memory = r.Params(r.Limit, r.Burst).Memory()
		rs.wait = min(rs.memory, p.cfg.MaxQuarantine)
		rs.entry.unread = len(r.KeyType) > 0 && rs.memory > p.cfg.UsageAwareAbove
		p.setLimit(rs, rs.entry, r.Limit)
		p.setStatic(rs, rs.entry)
		for _, e := range rs.keys {
			p.setStatic(rs, e) // the static shares may have changed
		}
		e := rs.entry
		for d := range p.dcs {
			if !rs.hasDoc[d] {
				// Without a document the DC enforces its static limit; it
				// stays the target until the estimates say otherwise.
				e.grant[d], e.target[d] = e.static[d], e.static[d]
				e.share[d] = e.frac(e.target[d])
				e.hist[d] = []write{{0, e.static[d]}}
			}
		}
	}
	for ref, rs := range p.rules {
		if !keep[ref] {
			p.entries -= 1 + len(rs.keys)
			delete(p.rules, ref)
		}
	}
}

// SetPolicy sets the operator's settings of a rule's shares, by DC name;
// nil clears them. It reports an error, and changes nothing, when the rule
// is unknown or a setting is invalid.
func (p *Planner) SetPolicy(domain, ruleID string, pol sharepolicy.Policy) error {
	rs := p.rules[ruleRef{domain, ruleID}]
	if rs == nil {
		return fmt.Errorf("planner: policy for unknown global rule %s/%s", domain, ruleID)
	}
	dcs, err := pol.Settings(p.dcs)
	if err != nil {
		return err
	}
	copy(rs.policy, dcs)
	return nil
}

// HasRule reports whether the rule is one the planner plans.
func (p *Planner) HasRule(domain, ruleID string) bool {
	return p.rules[ruleRef{domain, ruleID}] != nil
}

// EachRule calls f with every rule the planner plans, in no given order.
// f may call SetPolicy.
func (p *Planner) EachRule(f func(domain, ruleID string)) {
	for ref := range p.rules {
		f(ref.domain, ref.id)
	}
}
