package planner

import (
	"math"
	"time"
)

// Witnesses: a reading that releases a pruned write without waiting for
// the clock skew (docs/architecture.md, "Witnesses").
//
// A pruned write's carry is released by a reading taken after the DC's
// every instance had applied the newer write (observe). Taken after is
// judged by clocks: the reading's time, on the limiter's clock, more than
// the tolerated skew after the release, on the leader's. A write of the
// leader's to the DC's documents can judge it without clocks. Its
// revision is committed after the leader decided the release if the
// leader handed it out after deciding it, and an instance applies it only
// once it is committed. So a reading taken at an applied revision at or
// above that write's was taken after the release, by whichever instance
// took it: the write witnesses the release.
//
// The planner numbers what it hands out to be written — each Plan, each
// Leases, each WitnessLeases — and a release remembers the number of the
// last hand-out before it (carried.after). Each Write and Lease carries
// its hand-out's number back to Written or LeaseWritten, so the DC's
// writes of a later hand-out than a carry's after witness its release,
// whenever they are reported. Any of them would do; the first is the
// soonest.

// maxWitnesses bounds the witnesses remembered per DC: the first write of
// each of its last hand-outs. A carry older than all of them is released
// by the oldest, later than by its own first, but never early.
const maxWitnesses = 32

// witness is a write to a DC's documents: of hand-out `handout`, at
// revision rev.
type witness struct {
	handout uint64
	rev     int64
}

// noWitness marks a carry that no write releases: only a reading a skew
// younger does (a reading carried at its own time, keepReading).
const noWitness = math.MaxUint64

// witnessed records that DC d's documents were written at revision rev
// (0: unknown) in hand-out h. Witnesses stay in the order of their
// hand-outs; one reported after a later hand-out's is dropped (the later
// one stands for it, later but never early).
func (p *Planner) witnessed(d int, rev int64, h uint64) {
	ds := &p.dc[d]
	if rev <= 0 || h == 0 {
		return
	}
	if n := len(ds.witnesses); n > 0 && ds.witnesses[n-1].handout >= h {
		return // the first write of the hand-out is the soonest witness
	}
	if len(ds.witnesses) == maxWitnesses {
		ds.witnesses = append(ds.witnesses[:0], ds.witnesses[1:]...)
	}
	ds.witnesses = append(ds.witnesses, witness{h, rev})
	if w := ds.wanted.Load(); w != 0 && h >= w {
		ds.wanted.Store(0)
	}
}

// witnessRev returns the revision a reading must have been taken at for a
// write to witness the release of a carry made after hand-out after: the
// first of ws handed out later, or math.MaxInt64 when there is none yet.
func witnessRev(ws []witness, after uint64) int64 {
	for _, w := range ws {
		if w.handout > after {
			return w.rev
		}
	}
	return math.MaxInt64
}

// want records that a carry of DC d made now waits for its release: a
// write to d's documents handed out from now on would witness it.
// Plan's workers call it concurrently.
func (p *Planner) want(d int) {
	p.dc[d].wanted.Store(p.handouts + 1)
}

// WitnessLeases returns the leases to write now, between ticks, so that
// they witness the releases waiting for a write to their DC's documents
// (a lease is one): those of the DCs heard from since `since` whose lease
// has not run out, renewed as Leases would, valid until now + TTL. It
// forgets every DC it was asked for, returned or not: the next Tick's
// leases witness them anyway, and a DC past its lease is renewed by the
// tick alone (Leases). Report each lease written with LeaseWritten.
func (p *Planner) WitnessLeases(now, since time.Time, leader string) []Lease {
	var out []Lease
	for d, dc := range p.dcs {
		ds := &p.dc[d]
		if ds.wanted.Swap(0) == 0 || ds.heardAt.Before(since) || ds.expired {
			continue
		}
		out = append(out, p.lease(dc, now, leader))
	}
	return p.handOut(out)
}
