package quota

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrSynced is returned by Restore once the Table has been synced: a
// listing is newer than any saved state.
var ErrSynced = errors.New("quota: already synced")

// Assignments returns the last valid assignment of every rule the Table
// knows, in (domain, rule) order, with the revision they were in force at
// (what Applied returns): what a limiter saves so that a restart can
// Restore them. A rule whose latest document is corrupt or deleted is
// returned with its last valid limits — it enforces min(static, those)
// already; one that never had a valid document has a share of 0, as it
// enforces 0. The assignments' Epoch is the Table's.
func (t *Table) Assignments() (revision int64, as []Assignment) {
	s := t.snap.Load()
	for k, e := range s.rules {
		a := Assignment{DC: t.dc, Domain: k.domain, RuleID: k.id, Epoch: s.epoch,
			Share: e.rule.share, Limit: e.rule.local, GlobalLimit: e.rule.global}
		if len(e.keys) > 0 {
			a.Keys = make([]KeyShare, 0, len(e.keys))
			for key, l := range e.keys {
				a.Keys = append(a.Keys, KeyShare{Key: key, Share: l.share, Limit: l.local, GlobalLimit: l.global})
			}
			slices.SortFunc(a.Keys, func(x, y KeyShare) int { return strings.Compare(x.Key, y.Key) })
		}
		as = append(as, a)
	}
	slices.SortFunc(as, func(x, y Assignment) int {
		if c := strings.Compare(x.Domain, y.Domain); c != 0 {
			return c
		}
		return strings.Compare(x.RuleID, y.RuleID)
	})
	return s.applied, as
}

// Restore puts saved assignments (a previous process's Assignments) in
// force before the first listing: each rule they list enforces min(its
// static limit, the saved limit) — the saved documents apply as past a
// lease, so that a limiter restarted while the coordinator cannot reach it
// enforces no more than it did before it stopped, and never more than its
// static share. Rules not listed keep their static shares, as before any
// document. A saved assignment that fails the checks a document passes
// (see Change) is skipped, logged and counted, and its rule keeps its
// static share: a saved state is a cap, and a corrupt one only loses the
// cap. The Table stays unsynced and acknowledges nothing (Applied stays
// 0): the first Reset drops what Restore put and takes the listing alone,
// as a Table that never restored anything would — a rule the listing
// lacks takes its static share, and a corrupt listed document falls back
// to 0, not to the saved version, which may be older than what the
// coordinator wrote since. It returns how many assignments it put in force,
// or ErrSynced after the first Reset.
func (t *Table) Restore(saved []Assignment) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.snap.Load()
	if old.synced {
		return 0, ErrSynced
	}
	next := &snapshot{rules: make(map[ruleKey]*entry, len(saved))}
	for i := range saved {
		a := &saved[i]
		c := Change{Domain: a.Domain, RuleID: a.RuleID, Assignment: a}
		k := ruleKey{a.Domain, a.RuleID}
		rl, keys, err := c.assignment(t.dc)
		if err == nil && (c.IsLease() || next.rules[k] != nil) {
			err = fmt.Errorf("%w: rule %s/%s saved twice or unnamed", ErrCorrupt, a.Domain, a.RuleID)
		}
		if err != nil {
			t.skip(&c, fmt.Errorf("saved state: %w", err))
			continue
		}
		next.rules[k] = &entry{rule: rl, keys: keys, state: restored}
	}
	n := len(next.rules)
	t.publish(next)
	return n, nil
}
