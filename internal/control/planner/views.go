package planner

import (
	"sort"
	"time"

	"github.com/weirhq/weir/pkg/sharepolicy"
)

// RuleView is what the planner knows of one global rule, for operators.
type RuleView struct {
	Domain        string   `json:"domain"`
	RuleID        string   `json:"rule_id"`
	Limit         int64    `json:"limit"`
	WindowSeconds int64    `json:"window_seconds"`
	Keys          int      `json:"keys_with_shares"`
	DCs           []DCView `json:"dcs"`
	// Renewal is the window Demand is a fraction of: WindowSeconds, or for
	// calendar months the month holding the planner's latest time (its
	// last Tick or Plan).
	Renewal time.Duration `json:"-"`
}

// DCView is one DC's part of a rule or key.
type DCView struct {
	DC string `json:"dc"`
	// Demand is the estimated demand, a fraction of the limit.
	Demand float64 `json:"demand"`
	// Target is the share the allocation wants; Share is the share
	// written (in force once acknowledged); Held bounds what may be in
	// force meanwhile; Static is the safe static share. Each is a
	// fraction of the limit; the integers below are what they stand for.
	Target float64 `json:"target"`
	Share  float64 `json:"share"`
	Held   float64 `json:"held"`
	Static float64 `json:"static"`
	// TargetLimit, LocalLimit, HeldLimit and StaticLimit are the target,
	// the local limit written, the bound on what may be in force, and the
	// static limit, in integers that sum to at most the limit.
	TargetLimit int64                `json:"target_limit"`
	LocalLimit  int64                `json:"local_limit"`
	HeldLimit   int64                `json:"held_limit"`
	StaticLimit int64                `json:"static_limit"`
	Expired     bool                 `json:"lease_expired,omitempty"`
	Policy      sharepolicy.DCPolicy `json:"policy"`
}

// Snapshot returns every rule's state, sorted by domain and id.
func (p *Planner) Snapshot() []RuleView {
	rss := p.ruleStates()
	out := make([]RuleView, 0, len(rss))
	for _, rs := range rss {
		v := RuleView{Domain: rs.ref.domain, RuleID: rs.ref.id, Limit: rs.spec.Limit, WindowSeconds: rs.spec.WindowSeconds, Keys: len(rs.keys),
			Renewal: time.Duration(rs.windowMs(p.now.UnixMilli())) * time.Millisecond}
		v.DCs = p.dcViews(rs, rs.entry)
		out = append(out, v)
	}
	return out
}

// KeyView is one key with shares of its own.
type KeyView struct {
	Key      string   `json:"key"`
	Limit    int64    `json:"limit"`
	Retiring bool     `json:"retiring,omitempty"`
	DCs      []DCView `json:"dcs"`
}

// Keys returns the keys of a rule that have shares of their own, sorted; nil
// for an unknown rule.
func (p *Planner) Keys(domain, ruleID string) []KeyView {
	rs := p.rules[ruleRef{domain, ruleID}]
	if rs == nil {
		return nil
	}
	out := make([]KeyView, 0, len(rs.keys))
	for k, e := range rs.keys {
		out = append(out, KeyView{Key: k, Limit: e.limit, Retiring: e.retiring, DCs: p.dcViews(rs, e)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func (p *Planner) dcViews(rs *ruleState, e *entry) []DCView {
	out := make([]DCView, len(p.dcs))
	for d, dc := range p.dcs {
		pol := sharepolicy.DCPolicy{Floor: rs.policy[d].Floor, Ceiling: rs.policy[d].Ceiling, Drained: rs.policy[d].Drained}
		if rs.policy[d].Pinned {
			pin := rs.policy[d].Pin
			pol.Pin = &pin
		}
		held := p.held(rs, e, d)
		out[d] = DCView{DC: dc, Demand: e.est[d].Estimate(), Target: e.share[d], Share: e.frac(e.grant[d]), Held: e.frac(held),
			Static: e.frac(e.static[d]), TargetLimit: e.target[d], LocalLimit: e.grant[d], HeldLimit: held, StaticLimit: e.static[d],
			Expired: p.dc[d].expired, Policy: pol}
	}
	return out
}
