package planner

import (
	"math"
	"time"

	"github.com/weirhq/weir/pkg/allocate"
)

// Usage-aware limits (docs/architecture.md, "Usage-aware limits"): quota
// moved between DCs is quota not yet consumed in the window. A DC that
// applied local limit l at instant t, having consumed c(t) by its
// algorithm's count, consumes at most max(c(t), l) in every window that
// ends after t while l stays in force — whatever the window's length. So
// the planner counts a DC as holding the larger of its writes not yet
// acknowledged and what it reported consumed after applying the write in
// force, and the others grow only into what is left.

// reading is a DC's latest report of what it consumed of an entry.
type reading struct {
	v   int64 // consumed, in units of the entry's limit
	rev int64 // the revision the reporting instance had applied
	at  int64 // when it was read (Unix ms, the limiter's clock)
	ok  bool  // the DC reports consumption for the entry
}

// observe records that DC d consumed v of e, read at about readAt (Unix
// ms, the end of the report's interval) after the reporting instance had
// applied its DC's documents up to rev. A reading releases the carry of
// a pruned write only when it is surely younger than the DC's
// acknowledgement of the write in force: the reporting instance may have
// applied rev before the DC's other instances, which share its store and
// admit under their older limits until they apply it too. Surely younger:
// read more than skew (the clocks' disagreement) after the release, or at
// a revision at or above that of a write of ws, the DC's witnesses, handed
// out after it (witness.go).
func (e *entry) observe(d int, v, rev, readAt int64, skew time.Duration, ws []witness) {
	v = min(max(v, 0), e.limit)
	r := &e.used[d]
	switch {
	case r.ok && (rev < r.rev || rev == r.rev && readAt < r.at) || rev <= e.floor[d]:
		return // an older instance's view, or a report overtaken
	case r.ok && rev == r.rev && readAt == r.at:
		// Another instance's reading of the same interval: which of the
		// two was read last is unknown, so the larger stands.
		v = max(v, r.v)
	}
	*r = reading{v: v, rev: rev, at: readAt, ok: true}
	// Each pruned write is released by a reading younger than its own
	// release, so that frequent releases do not postpone the older ones.
	c := e.carry[d][:0]
	for _, k := range e.carry[d] {
		if rev < k.rev || readAt <= k.at+skew.Milliseconds() && rev < witnessRev(ws, k.after) {
			c = append(c, k)
		}
	}
	e.carry[d] = c
}

// forget replaces DC d's readings of e by v, the most it may have consumed
// at now (Unix ms), and refuses later readings taken at revision floor or
// before: they may have been taken before this instant. It returns v,
// which bounds every carried write: they stay, at most v each, until they
// age out. v is computed from them again at every call (held), and a write
// pruned a moment ago — or a reading, carried by keepReading — still
// bounds what the DC consumed for a memory.
// (Dropping them let a DC past its lease that applied a limit of 0 count
// as holding 0 at the next call, while its consumption under the static
// limit it left was still in the window: 476 of 473, seed 1457 of
// TestLongWindowProperty. Keeping them unbounded brought a carry above the
// static limit back when the lease was renewed.)
func (e *entry) forget(d int, v, floor, now int64) int64 {
	e.used[d] = reading{v: v, rev: floor, at: now, ok: true}
	e.floor[d] = max(e.floor[d], floor)
	for i := range e.carry[d] {
		e.carry[d][i].v = min(e.carry[d][i].v, v)
	}
	return v
}

// release is called at now (Unix ms) when DC d's writes older than its
// write in force at revision rev stop counting as held, every instance of
// the DC having applied rev, their largest limit being pruned: the DC may
// have consumed up to that much by then, and it stays held until a reading
// taken after now says otherwise. Those released at or before since
// (agedOut) are dropped first, and a reading taken by then counts 0, so
// that nothing aged out comes back in a new carry. It remembers at most
// keep pruned writes, merging two conservatively — the larger amount, held
// until a reading younger than both — and which two depends on what
// releases them:
//
//   - A read entry's next reading releases its oldest carries first, so
//     beyond keep the first two merge (trim): the oldest, but for a
//     reading keepReading carried at its own, earlier time.
//   - Carries released only by aging out (aging) fold into aligned slots
//     of unreadSlot ms: a write released in the slot of the newest carry
//     merges into it. The slots of one memory (now − since) number keep
//     at most, and a write is held at most a slot past its own aging out,
//     however many writes a memory holds (TestUnreadSlots). Merging by
//     pairs instead kept a shrinking DC's old limits alive: the two
//     oldest, for as long as it went on shrinking; the two released
//     closest in time, up to 1.87 memories with 1,000 writes a memory.
//
// after is the planner's last hand-out before the release: a write to the
// DC's documents handed out later witnesses it (witness.go). aging says
// only aging releases d's carries of e (held): an unread entry's, or a DC
// that sends no readings of an entry whose limits follow them; they fold
// into slots as an unread entry's do. Without readings and not aging,
// the quarantine covers the release and nothing is carried.
func (e *entry) release(d int, pruned, rev, now, since int64, keep int, after uint64, aging bool) {
	if !e.used[d].ok && !aging {
		return
	}
	c := e.carry[d][:0]
	for _, k := range e.carry[d] {
		if k.at > since {
			c = append(c, k)
		}
	}
	k := carried{v: max(pruned, e.read(d, since)), rev: rev, at: now, after: after}
	if n := len(c); aging && n > 0 {
		if slot := unreadSlot(now-since, keep); c[n-1].at/slot == now/slot {
			k = merge(c[n-1], k)
			c = c[:n-1]
		}
	}
	// Over keep: a read entry; or an unread one whose memory grew since
	// its carries were slotted, or whose leader's clock went back.
	e.carry[d] = trim(append(c, k), keep)
}

// trim merges the first two of carries c — the oldest but for a reading
// keepReading carried — while there are more than keep.
func trim(c []carried, keep int) []carried {
	for len(c) > max(keep, 1) {
		c[1] = merge(c[0], c[1])
		c = c[1:]
	}
	return c
}

// keepReading carries DC d's latest reading of e, at most static, at the
// reading's own time and revision, when it is one forget has not replaced
// and it has not aged out (taken after since): forget is about to replace
// it, and what the DC had consumed when it was read stays in the window
// until it ages out (or a reading a skew younger releases it), whatever
// the writes since allow. A carry that already covers it — the one release
// made of the write the reading came after, which folds the reading in —
// is enough: a carry for each, written and read every interval, would
// outgrow keep, and the merges at its front would keep a carry from ever
// being released. (Without the reading carried, a DC past its lease that
// read 190 after a shrink to 50 was counted at 50 once the memory had
// passed: TestForgetKeepsReading.)
func (e *entry) keepReading(d int, static, since int64, keep int) {
	r := e.used[d]
	if !r.ok || r.rev <= e.floor[d] || r.at <= since || r.v <= 0 {
		return
	}
	k := carried{v: min(r.v, static), rev: r.rev, at: r.at, after: noWitness}
	for _, o := range e.carry[d] {
		if o.v >= k.v && o.rev >= k.rev && o.at >= k.at {
			return
		}
	}
	c := e.carry[d][:0]
	for _, o := range e.carry[d] {
		if o.at > since {
			c = append(c, o)
		}
	}
	e.carry[d] = trim(append(c, k), keep)
}

// merge returns one carry standing for a and b: the larger amount, held
// until both would have been released.
func merge(a, b carried) carried {
	return carried{v: max(a.v, b.v), rev: max(a.rev, b.rev), at: max(a.at, b.at), after: max(a.after, b.after)}
}

// unreadSlot returns the width, in ms, of the slots an unread entry's
// carries fold into: keep − 1 of them span a memory of span ms, so the
// carries not aged out fall in keep slots at most.
func unreadSlot(span int64, keep int) int64 {
	return max(1, (span+int64(keep)-2)/int64(max(keep-1, 1)))
}

// carried is a pruned write still counted as consumed: v, released at
// revision rev at Unix ms at, after the planner's hand-out number after
// (noWitness: a reading carried, which only a younger reading releases).
type carried struct {
	v, rev, at int64
	after      uint64
}

// carriedFor returns how many pruned writes to remember per (entry, DC)
// with the given interval and tolerated skew: a DC that shrinks every
// interval (its reading declines as its consumption ages out) prunes a
// write per interval, each released only by a reading a skew younger, so
// the list must span the skew and a few intervals of report lag. A shorter
// one merges its oldest writes into one whose release time keeps moving on
// with every new write, and is never released while the DC goes on
// shrinking: with 200 ms intervals, a skew of 1 s and four writes kept, a
// long-window scenario's utilisation fell from 98.7% to 68.7% of L.
func carriedFor(interval, skew time.Duration) int {
	return max(4, int((skew+interval-1)/interval)+4)
}

// maxUnreadCarried bounds the writes an unread entry carries per DC.
const maxUnreadCarried = 128

// unreadCarried returns how many pruned writes an unread entry of rs
// carries per DC: one per interval of the rule's memory (and the skew),
// at least p.carried and at most maxUnreadCarried. Only aging releases
// them, so they fold into keep − 1 slots of the memory (release): under
// an interval each when the memory and skew are 124 intervals or less, a
// 127th of them beyond. There is one unread entry per keyed rule, so the
// list is cheap.
func (p *Planner) unreadCarried(rs *ruleState) int {
	n := int((rs.memory+p.cfg.Skew+p.cfg.Interval-1)/p.cfg.Interval) + 4
	return min(max(n, p.carried), maxUnreadCarried)
}

// carriedMax returns the largest amount DC d's pruned writes still carry:
// those released after since (Unix ms). A write released at or before it
// was out of force a whole memory ago (plus the skew for the DC's slowest
// instance), so what was admitted under it has left the window — which
// matters when no younger reading comes to release it (a limiter that
// restarted and forgot the entry).
func (e *entry) carriedMax(d int, since int64) int64 {
	m := int64(0)
	for _, k := range e.carry[d] {
		if k.at > since {
			m = max(m, k.v)
		}
	}
	return m
}

// consumed returns the most DC d may have consumed of e in the window, as
// far as its readings say; for a DC that sends no reading of e, the
// largest of its carried writes not aged out (an unread entry's, or those
// a key inherited from its rule when it got a share of its own), or 0.
// A reading taken at or before since (Unix ms: now less the rule's
// memory) has aged out whole — its DC stopped reading the entry (a
// restart, a store that did not answer) — and counts 0; what the DC
// consumed since is bounded by its limits, which held() counts.
func (e *entry) consumed(d int, since int64) int64 {
	return max(e.read(d, since), e.carriedMax(d, since))
}

// read returns DC d's latest reading of e, or 0 if it was taken at or
// before since, or if the DC sent none.
func (e *entry) read(d int, since int64) int64 {
	if !e.fresh(d, since) {
		return 0
	}
	return e.used[d].v
}

// fresh reports whether DC d sent a reading of e taken after since.
func (e *entry) fresh(d int, since int64) bool {
	return e.used[d].ok && e.used[d].at > since
}

// own returns what DC d's own target keeps of what it consumed: its latest
// reading. Its carry stays counted against the others (awareTargets leaves
// it out of what is free) but is no quota of d's own: d holds at most
// max(what it consumed, its limit), so a target of reading + grant holds
// at most carry + grant. So for a bucket too, whose fill a shrink leaves
// to drain at the new, slower rate: its readings say how much of it is
// left. (Counting a bucket's carry as its own kept a DC's target at its
// last limit for as long as its limit kept changing, each change pruning
// a write into a fresh carry: a promoted key's bucket in b, where all its
// demand went, was given 8 of 600 for minutes, TestPromotedKeyKeepsCarries.)
// awareTargets adds, for a congested entry, what d's demand uses in an
// interval of the limits its reading predates (unseen).
func (e *entry) own(d int, since int64) int64 {
	return e.read(d, since)
}

// agedOut returns the Unix ms at or before which a reading or carry of rs
// has aged out whole: now less the rule's memory and the tolerated clock
// skew (the reading's time is the limiter's clock). A bucket's too, though
// a DC keeps its fill undrained at a local limit of 0 (its drain is its
// limit): what counts is the bucket's contract, and what a DC admitted a
// memory ago the rule's own bucket has drained, whatever fill the DC still
// stores — that fill only blocks the DC itself (docs/architecture.md,
// "Quarantine"). A DC that reads sends a younger reading every interval;
// one that stops (at a limit of 0 with a fill left, its store not
// answering) must not hold what it read for good.
func (p *Planner) agedOut(rs *ruleState) int64 {
	return p.now.UnixMilli() - rs.memory.Milliseconds() - p.cfg.Skew.Milliseconds()
}

// usageAware reports whether any DC reports consumption for e, so that its
// targets are usage-aware.
func (e *entry) usageAware() bool {
	for _, r := range e.used {
		if r.ok {
			return true
		}
	}
	return false
}

// moveSpan is how many intervals apart a DC's demand may stop and
// another's start for the demand to have moved (movedAway).
const moveSpan = 5

// movedAway reports whether DC d's demand moved to another DC: d's demand
// stopped (observeDemand), and another DC started after d did and within
// moveSpan intervals of d's stop, and is still asking — or asked for longer
// than moveSpan intervals and then moved away in its turn, and so on
// (a → b → c: what a left went on to c, which is asking). A DC whose
// demand comes in periodic batches while the others' stays as it was has
// not moved: it keeps its own for the next batch. Nor does a chain pass
// through a blip: a batch, another DC's blip as it ends, then a DC that
// starts for good just after the blip is no move of the batch's demand.
func (e *entry) movedAway(d int) bool {
	var seen uint64
	return e.movedOn(d, &seen)
}

// movedOn is movedAway for d, looking past the DCs of seen, to which it
// adds d and every DC it looks at. A chain moves forward in startedAt, so
// it has no cycle; seen only spares looking at a DC twice. seen holds up
// to 64 DCs (the planner takes at most allocate.MaxStackDCs).
func (e *entry) movedOn(d int, seen *uint64) bool {
	*seen |= 1 << d
	s := e.stoppedAt[d]
	if s < 0 {
		return false
	}
	for o, t := range e.startedAt {
		if *seen&(1<<o) != 0 || t <= e.startedAt[d] || max(t-s, s-t) > moveSpan {
			continue
		}
		if e.est[o].Estimate() > 0 || e.stoppedAt[o]-t > moveSpan && e.movedOn(o, seen) {
			return true
		}
	}
	return false
}

// A chain's visited set is a uint64: the planner's DCs must fit.
var _ [64 - allocate.MaxStackDCs]struct{}

// unseen returns the largest local limit DC d may enforce for e that its
// latest reading predates: of the writes it may not have applied yet,
// those of a revision above the one the reading was taken at (a write of
// unknown outcome included). 0 when there is none.
func (e *entry) unseen(d int) int64 {
	l := int64(0)
	for _, w := range e.hist[d] {
		if w.rev > e.used[d].rev {
			l = max(l, w.limit)
		}
	}
	return l
}

// limits returns the largest local limit DC d may enforce for e: its
// grant, or a write it may not have applied yet.
func (e *entry) limits(d int) int64 {
	l := e.grant[d]
	for _, w := range e.hist[d] {
		l = max(l, w.limit)
	}
	return l
}

// awareTargets turns e's target shares into usage-aware local limits:
// each DC keeps what it consumed (own), and what nobody may hold is
// apportioned by the shares, so that quota moves between DCs only as it
// is left unconsumed. Targets are goals: when the readings sum above the
// limit (they disagree in time) nothing is free and the targets may sum
// above it too; the two-phase step, which bounds Σ max(held, next) by the
// limit, is what keeps the DCs within it. bucket says e's rule is one
// of the buckets; readings taken at or before since have aged out;
// congested, that the DCs ask for more than the limit renews.
//
// A DC whose demand moved away (movedAway) keeps nothing of its own while
// the entry is congested (the DCs' estimates ask for more than the limit
// renews): its target is its grant alone, below what it consumed. Its
// consumption then only falls as it ages out, and the next plans count it
// at its readings with no shrink of their own to wait for, so the DCs
// where the demand went grow into it about a reading after it leaves the
// window, not a round trip (acknowledgement, a reading a skew after it)
// later: in TestLongWindowQuotaFollowsBack, 95.2% of L per window against
// 90.5% with the reading kept. Anywhere else the rule costs more than it
// frees: a DC that comes back has only its grant until the next plan,
// which a sparse or bursty DC's requests do not outlast, a DC of periodic
// batches needs its own for the next one, and with room to spare nobody
// waits for its quota (TestOnlyDCsTheDemandLeftGiveUpTheirOwn). A
// bucket keeps its own: its fill drains only at its limit, so a target
// below its reading would keep it, counted against the others, for
// longer.
//
// A DC given more since its latest reading was taken keeps, while the
// entry is congested, what its demand uses of it in an interval (its
// estimate, in units of e per interval: perInterval at an estimate of
// 1): its target starts from reading + that, at most the largest limit
// the reading predates (unseen), and so does what it counts as holding.
// Between intervals the leader grows the DC the demand went to by what
// the others free (reread.go), while its reading is the last
// interval's; a tick that set its target from that reading cut it back
// below the grants it was using, and the cut stayed counted, given to
// nobody, until its next reading (TestLongWindowQuotaFollowsBack: 95.2%
// of L per window before, 95.7% now; 96.1% and 97.7% with three readings
// between intervals). Limits its reading has seen are not kept — the
// reading says what came of them, and a DC kept at them would never give
// up a share it no longer deserves (a fixed window's grant of L, read at
// 0 after the window turns) — nor more than its demand uses before the
// next reading: a DC asking a little, given its share of what was freed,
// would hold it unused against the others. Nothing is kept for a DC
// whose readings are absent or aged out, or whose lease expired (it must
// come down to its static limit to renew it).
//
// While some DC is underserved (below) in every plan for more than moveSpan
// intervals, every DC that has asked for more than moveSpan intervals keeps
// at most its share of the limit (one that has just started asking, its
// share still following its estimate up, is not cut). Else a DC that asked
// alone, and so consumed the whole limit, re-admitted under it all its own
// admissions freed as they left the window; nothing ever came free, and a
// second DC asking as much beside it got nothing for as long as the first
// asked (TestTwoDCsAskingShareTheLimit, a sliding window log: 0 of 1,200
// admitted in two minutes, now 596 of 1,198). A DC that does not ask right
// now (a batch's DC between batches) keeps what it consumed, for its next
// batch (TestOnlyDCsTheDemandLeftGiveUpTheirOwn).
func (e *entry) awareTargets(bucket bool, since int64, congested bool, dcs []dcState, perInterval float64, closed int64) {
	n := len(e.target)
	free := e.limit
	var cBuf, keepBuf [allocate.MaxStackDCs]int64
	c, keep := cBuf[:n], keepBuf[:n]
	for d := range n {
		c[d] = e.consumed(d, since)
		keep[d] = e.own(d, since)
		if congested && !dcs[d].expired && e.fresh(d, since) {
			// What its demand uses, in an interval, of the limits it got
			// since it was read.
			use := int64(math.Ceil(e.est[d].Estimate() * perInterval))
			keep[d] = max(keep[d], min(e.unseen(d), keep[d]+use))
			c[d] = max(c[d], keep[d])
		}
		free -= c[d]
	}
	if free < 0 {
		// The readings disagree in time; what is held bounds the sum.
		free = 0
	}
	a := make([]int64, n)
	allocate.Apportion(e.share, free, a)
	contended := false
	switch {
	case !congested || !e.underserved(closed):
		e.underservedSince = -1
	case e.underservedSince < 0:
		e.underservedSince = closed
	default:
		contended = closed-e.underservedSince > moveSpan
	}
	for d := range n {
		own := keep[d]
		if congested && !bucket && e.movedAway(d) {
			own = 0
		}
		if contended && e.asking(d, closed) {
			own = min(own, e.fair(d))
		}
		e.target[d] = min(e.limit, own+a[d])
	}
}

// fair is DC d's share of e's limit, rounded up.
func (e *entry) fair(d int) int64 {
	return int64(math.Ceil(e.share[d] * float64(e.limit)))
}

// asking reports whether DC d asks and has for more than moveSpan
// intervals up to interval closed.
func (e *entry) asking(d int, closed int64) bool {
	return e.est[d].Estimate() > 0 && e.startedAt[d] >= 0 && closed-e.startedAt[d] > moveSpan
}

// underserved reports whether some DC has asked for more than moveSpan
// intervals up to interval closed, asks for more than its grant renews, and
// has a grant below its share of the limit. A DC the demand has just moved
// to is not underserved yet: its share still follows its estimate up, and
// holding the others to their shares would cut it. One the demand has just
// left may still look underserved for an interval or two, as its estimate
// falls; awareTargets waits for the condition to last.
func (e *entry) underserved(closed int64) bool {
	for d := range e.grant {
		if e.asking(d, closed) && e.est[d].Estimate() > e.frac(e.grant[d]) && e.grant[d] < e.fair(d)-1 {
			return true
		}
	}
	return false
}
