package planner

import (
	"time"

	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// enforce at most min(static, assigned) now, so that is all they may hold,
// and the other DCs may grow into the rest.
func (p *Planner) expire(now time.Time) {
	for d := range p.dc {
		ds := &p.dc[d]
		if ds.leaseUntil.IsZero() || ds.expired || !now.After(ds.leaseUntil.Add(p.cfg.Skew)) {
			continue
		}
		ds.expired, ds.expiredAt = true, now
	}
}

// Leases returns the lease to write for each DC heard from since `since`,
// valid until now + TTL; the other DCs' leases run out. A DC whose lease
// has run out is renewed only once its documents fit in what it may hold
// and it has acknowledged them, so that renewing it cannot take the shares
// in force above 1. Report each lease written with LeaseWritten.
func (p *Planner) Leases(now time.Time, since time.Time, leader string) []Lease {
	var out []Lease
	for d, dc := range p.dcs {
		if p.dc[d].heardAt.Before(since) || p.dc[d].expired && !p.renewable(d) {
			continue
		}
		out = append(out, p.lease(dc, now, leader))
	}
	return p.handOut(out) // after the releases renewable made
}

// Lease is a DC's lease to write (Doc), as Leases or WitnessLeases handed
// it out.
type Lease struct {
	Doc     *weirv1.AssignmentLease
	handout uint64
}

// lease returns DC dc's lease, valid until now + TTL.
func (p *Planner) lease(dc string, now time.Time, leader string) Lease {
	return Lease{Doc: &weirv1.AssignmentLease{
		Dc: dc, Epoch: p.epoch, ValidUntilMs: now.Add(p.cfg.TTL).UnixMilli(),
		TtlMs: p.cfg.TTL.Milliseconds(), Leader: leader,
	}}
}

// handOut numbers ls as the next hand-out.
func (p *Planner) handOut(ls []Lease) []Lease {
	p.handouts++
	for i := range ls {
		ls[i].handout = p.handouts
	}
	return ls
}

func (p *Planner) renewable(d int) bool {
	ok := true
	p.each(func(rs *ruleState, e *entry) {
		p.held(rs, e, d)
		for _, w := range e.hist[d] {
			if w.limit > e.static[d] {
				ok = false
			}
		}
	})
	return ok
}

// LeaseWritten records that l was written at revision rev (0 if unknown):
// a write to the DC's documents, which witnesses the releases made before
// the Leases or WitnessLeases that handed it out (witness.go).
func (p *Planner) LeaseWritten(l Lease, rev int64) {
	d, ok := p.dcIndex[l.Doc.GetDc()]
	if !ok {
		return
	}
	p.witnessed(d, rev, l.handout)
	ds := &p.dc[d]
	ds.leaseUntil = time.UnixMilli(l.Doc.GetValidUntilMs())
	if ds.expired {
		ds.expired = false
	}
}
