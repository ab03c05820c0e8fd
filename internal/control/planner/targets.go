package planner

import (
	"github.com/weirhq/weir/pkg/allocate"
	"github.com/weirhq/weir/pkg/rule"
)

// retarget feeds every entry the intervals of closes (closeEntry) and,
// past the warm-up, computes its target shares from the estimates. It is
// Tick's one pass over the entries, each closed and retargeted while its
// state is in the cache: with 100,000 entries the round is bound by
// memory, not by arithmetic. The rules are spread over the workers
// (spreadRules).
func (p *Planner) retarget(closes []closing) {
	warm := p.closed-p.started >= int64(p.cfg.Warmup) // a new leader first learns the demand
	n := len(p.dcs)
	type scratch struct {
		in      []allocate.DC
		out     []float64
		retired int
	}
	rss := p.ruleStates()
	work := make([]scratch, p.workers(len(rss)))
	for w := range work {
		work[w] = scratch{in: make([]allocate.DC, n), out: make([]float64, n)}
	}
	p.spreadRules(rss, func(w, i int) {
		rs, in, out := rss[i], work[w].in, work[w].out
		for _, c := range closes {
			p.closeEntry(rs.entry, c)
		}
		if warm {
			if len(rs.spec.KeyType) > 0 {
				p.allocateKeyed(rs, in, out)
			} else {
				p.allocate(rs, rs.entry, in, out)
			}
		}
		for key, e := range rs.keys {
			for _, c := range closes {
				p.closeEntry(e, c)
			}
			if warm && p.retargetKey(rs, e, in, out) {
				delete(rs.keys, key)
				work[w].retired++
				for d := range rs.dirty {
					rs.dirty[d] = true
				}
			}
		}
	})
	for _, s := range work {
		p.entries -= s.retired
	}
}

// retargetKey sets key entry e's targets, and reports whether it has
// retired: quiet for long enough, and at the rule's shares in every DC.
func (p *Planner) retargetKey(rs *ruleState, e *entry, in []allocate.DC, out []float64) bool {
	pressured := false
	for d := range p.dcs {
		if e.est[d].Estimate() > rs.entry.frac(rs.entry.grant[d])/2 {
			pressured = true
		}
	}
	if pressured {
		e.quiet, e.retiring = 0, false
	} else if e.quiet++; e.quiet > p.cfg.Retire {
		e.retiring = true
	}
	if !e.retiring {
		p.allocate(rs, e, in, out)
		return false
	}
	e.aware = false
	for d := range p.dcs {
		e.target[d] = ruleLimitFor(rs, e, rs.entry.target[d])
		e.share[d] = e.frac(e.target[d])
	}
	return p.retired(rs, e)
}

func (p *Planner) allocate(rs *ruleState, e *entry, in []allocate.DC, out []float64) {
	copy(in, rs.policy)
	asked := 0.0
	for d := range in {
		in[d].Demand = e.est[d].Estimate()
		asked += in[d].Demand
	}
	allocate.Allocate(in, out)
	copy(e.share, out)
	allocate.Apportion(out, e.limit, e.target)
	e.aware = e.usageAware()
	if e.aware {
		// The demands are fractions of the limit's rate: together they
		// ask for more than it renews when they pass 1.
		e.congested = asked >= 1
		per := p.perInterval(e.limit, rs.windowMs(p.now.UnixMilli()))
		e.awareTargets(rs.spec.Algorithm.IsBucket(), p.agedOut(rs), e.congested, p.dc, per, p.closed)
	} else {
		e.underservedSince = -1 // a run of underserved plans restarts
	}
}

// keyedHeadroom is the part of a keyed rule's limit its DCs' shares leave
// to headroom: a new key may start in any DC.
const keyedHeadroom = 0.1

// allocateKeyed sets the rule-level targets of a rule with keys. Its limit
// applies to each key, so the rule's offered count over all keys says where
// its traffic comes from, not how much of one key's limit is wanted: the
// DCs' demands are their fractions of the traffic, scaled so that
// keyedHeadroom is left for the headroom rules of package allocate. Keys
// that need more than that get shares of their own.
func (p *Planner) allocateKeyed(rs *ruleState, in []allocate.DC, out []float64) {
	copy(in, rs.policy)
	total := 0.0
	for d := range in {
		total += rs.entry.est[d].Estimate()
	}
	for d := range in {
		in[d].Demand = 0
		if total > 0 {
			in[d].Demand = rs.entry.est[d].Estimate() / total * (1 - keyedHeadroom)
		}
	}
	allocate.Allocate(in, out)
	copy(rs.entry.share, out)
	allocate.Apportion(out, rs.entry.limit, rs.entry.target)
}

// retired reports whether key entry e can leave the documents: its shares
// equal the rule's in every DC, and are the only ones that may be in force.
func (p *Planner) retired(rs *ruleState, e *entry) bool {
	for d := range p.dcs {
		if e.grant[d] != ruleLimitFor(rs, e, rs.entry.grant[d]) || len(e.hist[d]) != 1 || e.next != nil {
			return false
		}
	}
	return true
}

// ruleLimitFor returns what a DC enforces for key entry e when the rule's
// local limit there is v and the key has no limit of its own: v scaled to
// the key's limit, rounded down (rule.LocalLimit).
func ruleLimitFor(rs *ruleState, e *entry, v int64) int64 {
	return rule.LocalLimit(v, rs.entry.limit, 0, e.limit)
}
