package planner

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/weirhq/weir/pkg/allocate"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Write is one document to write: a DC's assignment of a rule.
type Write struct {
	DC, Domain, RuleID string
	Doc                *weirv1.RuleAssignment
	handout            uint64 // the Plan that handed it out (witness.go)
}

// Plan applies the acknowledgements, raises the targets of the entries
// whose readings between intervals freed quota (reread.go), and computes
// the next grants of every entry (two-phase: shrinks at once; grows only
// into quota no other DC may still hold), and returns the documents that
// change, marked in flight.
// The caller writes them and reports each outcome with Written. Plan with
// writes in flight — from a Plan not yet followed by Settle, whatever
// changed since — returns nothing. Each rule is one worker's
// (Config.Workers) part of the round.
func (p *Planner) Plan(now time.Time) []Write {
	p.now = now
	if p.planned {
		return nil
	}
	p.planned = len(p.rules) > 0 // the entries' next stay set until Settle
	p.retargetRereads()
	p.epoch++
	rss := p.ruleStates()
	byRule := make([][]Write, len(rss))
	due := make([][]bool, p.workers(len(rss)))
	for w := range due {
		due[w] = make([]bool, len(p.dcs))
	}
	p.spreadRules(rss, func(w, i int) {
		p.stepRule(rss[i], due[w])
		byRule[i] = p.docs(rss[i], due[w], now)
	})
	var ws []Write
	for _, rw := range byRule {
		ws = append(ws, rw...)
	}
	p.handouts++ // handed out after this round's releases
	for i := range ws {
		ws[i].handout = p.handouts
	}
	if len(ws) == 0 {
		p.epoch--
	}
	return ws
}

// stepRule steps every entry of rs, and sets due[d] when DC d's document
// of rs must change: a grant in it moves, or the DC has none yet (or has
// to be rewritten).
func (p *Planner) stepRule(rs *ruleState, due []bool) {
	e := rs.entry
	p.step(rs, e)
	for d := range due {
		due[d] = rs.dirty[d] || e.next[d] != e.grant[d] || !rs.hasDoc[d] && (e.next[d] != e.static[d] || len(rs.keys) > 0)
	}
	for _, e := range rs.keys {
		p.step(rs, e)
		for d := range due {
			due[d] = due[d] || e.next[d] != e.grant[d]
		}
	}
}

// docs returns the documents of rs due in each DC, built from the grants
// in flight, with the keys in order. It keeps the keys' entries in that
// order for Written.
func (p *Planner) docs(rs *ruleState, due []bool, now time.Time) []Write {
	if !slices.Contains(due, true) {
		return nil
	}
	var ws []Write
	// rs.docKeys is empty: Plan runs docs only after Settle emptied it.
	for _, ke := range rs.keys {
		rs.docKeys = append(rs.docKeys, ke)
	}
	slices.SortFunc(rs.docKeys, func(a, b *entry) int { return strings.Compare(a.key, b.key) })
	e := rs.entry
	for d, dc := range p.dcs {
		if !due[d] {
			continue
		}
		doc := &weirv1.RuleAssignment{
			Dc: dc, Domain: rs.ref.domain, RuleId: rs.ref.id,
			Epoch: p.epoch, Share: e.frac(e.next[d]), Limit: e.next[d], GlobalLimit: e.limit, IssuedMs: now.UnixMilli(),
		}
		if len(rs.docKeys) > 0 {
			// One allocation for a document's key shares, not one each.
			shares := make([]weirv1.KeyShare, len(rs.docKeys))
			doc.Keys = make([]*weirv1.KeyShare, len(rs.docKeys))
			for i, ke := range rs.docKeys {
				ks := &shares[i]
				ks.Key, ks.Share, ks.Limit, ks.GlobalLimit = ke.key, ke.frac(ke.next[d]), ke.next[d], ke.limit
				doc.Keys[i] = ks
			}
		}
		ws = append(ws, Write{DC: dc, Domain: rs.ref.domain, RuleID: rs.ref.id, Doc: doc})
	}
	return ws
}

// step applies the acknowledgements to e and sets e.next, in integers:
// after it, Σ over DCs of bound(held, next) ≤ e.limit whenever it was
// before, or whenever every DC's held fits (docs/architecture.md, "Safety").
func (p *Planner) step(rs *ruleState, e *entry) {
	n := len(p.dcs)
	if p.settled(rs, e) {
		e.next = e.grant // nothing to move: most entries, most rounds
		return
	}
	var heldBuf, wantBuf [allocate.MaxStackDCs]int64
	held, want := heldBuf[:n], wantBuf[:n]
	heldSum := int64(0)
	for d := range n {
		held[d] = p.held(rs, e, d)
		heldSum += held[d]
	}
	next := make([]int64, n)
	for d := range n {
		// Shrinks at once, and grows free of charge up to what the DC may
		// hold already — only while what the DCs may hold fits in the
		// limit: held is a bound, often above what the DC consumed (a
		// carried write, the whole limit after a takeover), and growing
		// into it raises what the DC may really consume. A DC whose lease
		// ran out only shrinks: it must fit in what it holds before its
		// lease is renewed.
		next[d] = min(e.target[d], e.grant[d])
		switch {
		case p.dc[d].expired:
			next[d] = min(next[d], held[d])
		case heldSum <= e.limit:
			next[d] = max(next[d], min(e.target[d], held[d]))
		}
	}
	// Grows: into the room no DC may hold, shared in proportion to what
	// each DC still wants, by largest remainder.
	sum, wanted := int64(0), int64(0)
	for d := range n {
		sum += p.bound(e, d, held[d], next[d])
		want[d] = 0
		if !p.dc[d].expired {
			want[d] = max(0, e.target[d]-max(held[d], next[d]))
			wanted += want[d]
		}
	}
	if room := e.limit - sum; room > 0 && wanted > 0 {
		var fBuf [allocate.MaxStackDCs]float64
		var gBuf [allocate.MaxStackDCs]int64
		grow := gBuf[:n]
		if room >= wanted {
			copy(grow, want)
		} else {
			f := fBuf[:n]
			for d := range n {
				f[d] = float64(want[d]) / float64(wanted)
			}
			allocate.Apportion(f, room, grow)
		}
		for d := range n {
			if g := min(grow[d], want[d], room); g > 0 {
				next[d] = max(held[d], next[d]) + g
				room -= g
			}
		}
	}
	e.next = next
}

// settled reports whether e is at its targets with nothing unacknowledged
// in any DC, so that a round has nothing to do for it.
func (p *Planner) settled(rs *ruleState, e *entry) bool {
	for d := range p.dcs {
		if e.target[d] != e.grant[d] || p.dc[d].expired {
			return false
		}
		if len(e.hist[d]) > 1 {
			p.held(rs, e, d) // prune what was acknowledged
			if len(e.hist[d]) > 1 {
				return false
			}
		}
	}
	return true
}

// bound is the most DC d may enforce of e, when it may hold up to held,
// once next is written.
func (p *Planner) bound(e *entry, d int, held, next int64) int64 {
	if p.dc[d].expired {
		return max(held, min(e.static[d], next))
	}
	return max(held, next)
}

// held prunes e's writes in DC d to those the DC may still enforce, given
// its acknowledgement, and returns the most it may enforce: the largest of
// them, or, while its lease has run out, no more than its static limit.
func (p *Planner) held(rs *ruleState, e *entry, d int) int64 {
	h := e.hist[d]
	// Released quota counts as held until the release has been in force
	// for the rule's quarantine — unless the DC reports what it consumed:
	// then it counts until a reading taken after the release says how much
	// of it was consumed (consumed.go).
	//
	// aging: d's pruned writes are carried instead until they age out a
	// memory (and the skew) after their release, or a reading of d's, if
	// one comes, releases them — e is unread (no DC reads it), or its
	// limits follow the DCs' readings and d sends none
	// (a limiter of a version without them, or whose store did not answer
	// them): the quarantine alone, capped below the memory, let another
	// DC admit again what d had admitted under them (604 of 600,
	// TestNoReadingsCarries).
	aging := e.unread || !e.used[d].ok && rs.memory > p.cfg.UsageAwareAbove
	wait := rs.wait
	if e.used[d].ok || aging {
		wait = 0
	}
	ack := p.ackSince(d, wait)
	i := 0
	for j := range h {
		if h[j].rev <= ack {
			i = j
		}
	}
	ds := &p.dc[d]
	// capped: the DC's lease ran out a whole memory ago, so what it
	// admitted under any of its writes within the window, it admitted
	// under its static limit. Never a bucket's: its memory is a full
	// bucket's drain at the rule's rate, but past its lease it drains at
	// min(static, assigned), which may be far slower (at an assignment of
	// 0, not at all), so a fill from before can stay above its static
	// limit long after: counted at that limit, the others grew into what
	// it still held (697 of 695, seed 419 of TestLongWindowProperty, in
	// the fills summed that the test measured then). Such a fill only
	// blocks the DC itself as far as the bucket's contract goes; not
	// capping it only holds more, and stays.
	capped := ds.expired && !rs.spec.Algorithm.IsBucket() && !p.now.Before(ds.expiredAt.Add(rs.memory))
	if i > 0 {
		pruned := int64(0)
		for _, w := range h[:i] {
			pruned = max(pruned, w.limit)
		}
		if capped {
			pruned = min(pruned, e.static[d])
		}
		e.release(d, pruned, h[i].rev, p.now.UnixMilli(), p.agedOut(rs), p.keep(rs, e), p.handouts, aging)
		if e.used[d].ok && !e.unread {
			p.want(d) // a reading releases it: a write would let one do so sooner
		}
		h = append(h[:0], h[i:]...)
		e.hist[d] = h
	}
	m := int64(0)
	for _, w := range h {
		m = max(m, w.limit)
	}
	since := p.agedOut(rs)
	if p.dc[d].expired {
		// Past its lease the DC enforces at most its static limit; what it
		// consumed before stays counted until the rule's memory (its
		// window; two for the sliding counter; a bucket's drain) has
		// passed since the lease surely ran out.
		switch {
		case !capped && (e.unread || e.used[d].ok):
			return max(m, e.consumed(d, since))
		case !e.used[d].ok:
			return max(min(e.static[d], m), e.consumed(d, since))
		}
		// The memory has passed: whatever the DC consumed now, it admitted
		// under its static limit. Its readings from before are forgotten
		// for good, so that renewing its lease cannot bring them back; what
		// the one not forgotten yet says stays counted, at most the static
		// limit, until it ages out or a younger reading releases it
		// (keepReading).
		e.keepReading(d, e.static[d], since, p.keep(rs, e))
		return e.forget(d, min(e.static[d], max(m, e.carriedMax(d, since))), p.floorRev(e, d), p.now.UnixMilli())
	}
	return max(m, e.consumed(d, since))
}

// keep returns how many pruned writes e carries per DC.
func (p *Planner) keep(rs *ruleState, e *entry) int {
	if e.unread {
		return p.unreadCarried(rs)
	}
	return p.carried
}

// floorRev is the newest revision DC d may have applied of e: a reading
// taken at revision floorRev or before may predate this instant.
func (p *Planner) floorRev(e *entry, d int) int64 {
	f := p.lastRev
	for _, w := range e.hist[d] {
		if w.rev != math.MaxInt64 {
			f = max(f, w.rev)
		}
	}
	return f
}

// share is v as a fraction of e's limit, for documents and views.
func (e *entry) frac(v int64) float64 {
	if e.limit <= 0 {
		return 0
	}
	return min(1, float64(v)/float64(e.limit))
}

// Written reports the outcome of writing ws (a part of what Plan returned):
// ok with the revision of the write, or not ok when the write failed or
// its outcome is unknown. Call it for every Write Plan returned, then
// Settle. A successful write witnesses the releases made before the Plan
// that handed it out (witness.go).
func (p *Planner) Written(ws []Write, rev int64, ok bool) {
	if ok {
		p.lastRev = max(p.lastRev, rev)
		p.stats.Writes += uint64(len(ws))
		for _, w := range ws {
			if d, known := p.dcIndex[w.DC]; known {
				p.witnessed(d, rev, w.handout)
			}
		}
	} else {
		p.stats.WriteFailures += uint64(len(ws))
	}
	for _, w := range ws {
		rs := p.rules[ruleRef{w.Domain, w.RuleID}]
		d, known := p.dcIndex[w.DC]
		if rs == nil || !known {
			continue
		}
		apply := func(e *entry, local int64) {
			h := e.hist[d]
			if ok {
				for j := range h {
					if h[j].rev == math.MaxInt64 {
						h[j].rev = rev - 1 // it happened, if at all, before rev
					}
				}
				if local != e.grant[d] || len(h) == 0 || !rs.hasDoc[d] {
					h = append(h, write{rev, local})
				}
				e.grant[d] = local
			} else {
				// It may or may not be in force; only a later successful
				// write can be acknowledged.
				h = append(h, write{math.MaxInt64, local})
			}
			if len(h) > maxHist {
				h[1] = write{h[0].rev, max(h[0].limit, h[1].limit)}
				h = h[1:]
			}
			e.hist[d] = h
		}
		apply(rs.entry, w.Doc.GetLimit())
		for i, k := range w.Doc.GetKeys() {
			var e *entry
			if i < len(rs.docKeys) && rs.docKeys[i].key == k.GetKey() {
				e = rs.docKeys[i] // Plan's order: no lookup (entries leave rs.keys only settled)
			} else {
				e = rs.keys[k.GetKey()]
			}
			if e != nil {
				apply(e, k.GetLimit())
			}
		}
		if ok {
			rs.hasDoc[d], rs.dirty[d], rs.docEpoch[d] = true, false, w.Doc.GetEpoch()
		} else {
			rs.dirty[d] = true
		}
	}
}

// Settle ends the round Plan started: the grants not written stay as they
// were.
func (p *Planner) Settle() {
	p.planned = false
	for _, rs := range p.rules {
		clear(rs.docKeys) // no retired entry stays referenced past the keys' count
		rs.docKeys = rs.docKeys[:0]
		rs.entry.next = nil
		for _, e := range rs.keys {
			e.next = nil
		}
	}
}

type write struct {
	rev   int64 // math.MaxInt64 while unknown (a write whose outcome is unknown)
	limit int64 // the local limit written
}

// maxHist bounds the writes remembered per (entry, DC); older ones merge,
// conservatively, into the first.
const maxHist = 16
