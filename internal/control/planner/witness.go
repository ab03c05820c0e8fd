package planner

import "math"

// Witnesses: a reading that releases a pruned write without waiting for
// the clock skew (docs/architecture.md, "Long windows").
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
// Leases — and a release remembers the number of the last hand-out before
// it (carried.after). A write reported by Written or LeaseWritten belongs
// to the last hand-out (their contract), so the DC's writes of a later
// hand-out than a carry's after witness its release. Any of them would do;
// the first is the soonest.

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
// (0: unknown) in the last hand-out.
func (p *Planner) witnessed(d int, rev int64) {
	ds := &p.dc[d]
	if rev <= 0 || p.handouts == 0 {
		return
	}
	if n := len(ds.witnesses); n > 0 && ds.witnesses[n-1].handout == p.handouts {
		return // the first write of the hand-out is the soonest witness
	}
	if len(ds.witnesses) == maxWitnesses {
		ds.witnesses = append(ds.witnesses[:0], ds.witnesses[1:]...)
	}
	ds.witnesses = append(ds.witnesses, witness{p.handouts, rev})
	if w := ds.wanted.Load(); w != 0 && p.handouts >= w {
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

// Unwitnessed returns the DCs with carried quota that a write to their
// documents would release sooner than the clock skew does, and forgets
// them: the caller may write their leases now (Leases, LeaseWritten)
// rather than at the next Tick, which witnesses them anyway.
func (p *Planner) Unwitnessed() []string {
	var out []string
	for d := range p.dc {
		if p.dc[d].wanted.Swap(0) != 0 {
			out = append(out, p.dcs[d])
		}
	}
	return out
}
