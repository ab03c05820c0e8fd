package planner

// Rewrite asks for dc's document of the rule (domain, ruleID) to be
// written by the next Plan, although its grants did not change: the
// coordinator calls it when the document in etcd is not one this planner
// wrote or loaded (corrupt, deleted, or written by someone else). The
// document Plan then writes is the one it would write anyway, under the
// same two-phase rules, so nothing else changes. Unknown rules and DCs are
// ignored.
func (p *Planner) Rewrite(dc, domain, ruleID string) {
	rs := p.rules[ruleRef{domain, ruleID}]
	d, ok := p.dcIndex[dc]
	if rs == nil || !ok {
		return
	}
	rs.dirty[d] = true
}
