package planner

import "time"

// Tick closes the intervals that ended before now, less the grace for
// reports in flight (SetReportGrace; 40% of an interval unless set),
// updates the estimates and the targets, and notices DCs whose lease ran
// out. Call it about every interval; the first call after Load starts the
// warm-up.
func (p *Planner) Tick(now time.Time) {
	p.now = now
	defer p.dropRereads() // every target is set from the readings at hand
	ms := now.UnixMilli() - p.graceMs
	last := ms/p.intervalMs - 1 // the last interval that ended before ms
	if p.started < 0 {
		p.started, p.closed = last, last
		p.expire(now)
		return
	}
	var closes []closing
	for idx := p.closed + 1; idx <= last; idx++ {
		closes = append(closes, p.prepareClose(idx))
	}
	if last > p.closed {
		p.closed = last
	}
	p.expire(now)
	p.retarget(closes)
}

// DefaultGracePct is the grace for reports in flight, in percent of an
// interval, until SetReportGrace sets another.
const DefaultGracePct = 40

// SetReportGrace sets how long after an interval ends Tick waits for its
// reports before it closes the interval: at least 1 ms, at most
// DefaultGracePct of an interval. A report that comes later counts as late
// (Ingest).
func (p *Planner) SetReportGrace(g time.Duration) {
	p.graceMs = min(max(g.Milliseconds(), 1), p.intervalMs*DefaultGracePct/100)
}

func (p *Planner) heard(d int, idx int64) bool { return p.dc[d].heard[idx%heardLen] == idx }

// lostGrace is how many intervals before a silent one are looked at: when
// DC d was heard in one of them, its report for this interval was lost
// (Kafka drops, a consumer rebalance) and the interval is skipped, not
// counted as no demand. Lost reports are then merely unseen, and the
// estimate stays unbiased under random loss; a DC silent for longer
// decays as before, and one silent past its lease is expired. With 2, a
// fifth of the reports lost silenced one of three DCs for three intervals
// in a row about once a minute (0.2³ per interval and DC), and its
// estimate decayed while it kept its demand: the lossy-reports scenario
// missed its convergence goal in about one run of five. With 4 it takes
// five in a row: once in a quarter of an hour.
//
// Blind intervals do not count: nobody was heard in them, so they say
// nothing of d. When the pipeline comes back the DCs' writers reconnect
// one by one, and a DC last heard before a blind spell is unseen, not
// missing, until it has been silent for lostGrace intervals in which
// another DC was heard (dcState.unheard). Counting the blind intervals
// made such a DC missing: its estimate decayed for an interval or more,
// and once its reports resumed the gap to its demand was under the
// estimator's step threshold, so the estimate climbed back only at the
// slow mean's pace: the DC stayed underserved for seconds, and the DC
// taking the rest of the limit changed direction when it was corrected
// (the broker-outage scenario's oscillation).
const lostGrace = 4

// closing is an interval to close: each entry's estimates are fed the
// interval's sums (closeEntry). An interval no DC was heard from is blind:
// the usage pipeline (Kafka, or this coordinator's consumer) failed, not
// every DC's demand at once, so the estimates hold instead of decaying as
// they do for one silent DC.
type closing struct {
	idx   int64
	blind bool
	ready []int64 // per DC: the late interval standing in for it, or -1
	// lost, per DC not heard in the interval: it was heard in one of the
	// lostGrace intervals before that were not blind, so its report was
	// lost and its estimate holds.
	lost []bool
}

// prepareClose returns interval idx to close, and moves each DC's observed
// interval past it. It needs nothing of the entries, so every interval
// of a tick is prepared before the one pass over them.
func (p *Planner) prepareClose(idx int64) closing {
	c := closing{idx: idx, blind: true, ready: make([]int64, len(p.dcs)), lost: make([]bool, len(p.dcs))}
	for d := range p.dcs {
		c.ready[d] = -1
		if !p.heard(d, idx) {
			c.ready[d] = p.lateReady(d)
		}
		if p.heard(d, idx) || c.ready[d] >= 0 {
			c.blind = false
		}
	}
	if c.blind {
		p.stats.BlindIntervals++
	}
	for d := range p.dc {
		ds := &p.dc[d]
		switch {
		case p.heard(d, idx):
			ds.observed, ds.unheard = idx, 0
		case c.ready[d] >= 0:
			ds.observed, ds.unheard = c.ready[d], 0
		case !c.blind:
			c.lost[d] = ds.unheard < lostGrace
			ds.unheard = min(ds.unheard+1, lostGrace)
		}
	}
	return c
}

// closeEntry feeds DC d's sum for interval idx to e's estimate: the
// interval's own reports; else, when a late interval of the DC is ready
// (ready[d], see lateReady), the entry's sum in it, or nothing; else a
// hold or a decay, as the DC was last heard.
func (p *Planner) closeEntry(e *entry, c closing) {
	idx, blind, ready := c.idx, c.blind, c.ready
	for d := range p.dcs {
		slot := &e.pend[d][idx%ring]
		switch {
		case slot.idx == idx:
			p.observeDemand(e, d, idx, slot.sum)
		case p.heard(d, idx):
			p.observeDemand(e, d, idx, 0)
		case ready[d] >= 0:
			sum := 0.0
			if l := e.late[d][ready[d]%2]; l.idx == ready[d] {
				sum = l.sum
			}
			p.observeDemand(e, d, idx, sum)
		case blind || c.lost[d] || p.heardLateWithin(d, lostGrace):
			p.est.Hold(&e.est[d], idx)
		default:
			p.est.Advance(&e.est[d], idx)
		}
		if slot.idx <= idx {
			slot.idx = -1
		}
	}
}

// observeDemand feeds DC d's demand x in interval idx to e's estimate,
// and notes when d's demand stopped — its estimate fell to 0 on an
// interval without requests, until it sends one again — and when its
// estimate rose from 0.
// A DC whose estimate never left 0 (too sparse for the estimator) has
// neither started nor stopped.
func (p *Planner) observeDemand(e *entry, d int, idx int64, x float64) {
	before := e.est[d].Estimate()
	p.est.Observe(&e.est[d], idx, x)
	after := e.est[d].Estimate()
	switch {
	case x > 0:
		e.stoppedAt[d] = -1
	case before > 0 && after == 0:
		e.stoppedAt[d] = idx
	}
	if before == 0 && after > 0 {
		e.startedAt[d] = idx
	}
}

// heardLateWithin reports whether a late report of DC d came within the
// last n intervals: its reports lag, they are not lost.
func (p *Planner) heardLateWithin(d int, n int64) bool {
	at := p.dc[d].lateAt
	return !at.IsZero() && p.now.Sub(at) <= time.Duration(n*p.intervalMs)*time.Millisecond
}

// expire notices the DCs whose lease has run out for sure: their limiters

// lateSettle is how long, as a fraction of an interval, the late reports
// of an interval gather before they stand in for a DC.
const lateSettle = 0.25

// lateReady returns the newest late interval of DC d newer than what the
// estimates have seen whose first report came lateSettle ago, or -1.
func (p *Planner) lateReady(d int) int64 {
	ds := &p.dc[d]
	settle := time.Duration(lateSettle*float64(p.intervalMs)) * time.Millisecond
	ready := int64(-1)
	for _, l := range ds.late {
		if l.idx > ds.observed && l.idx > ready && p.now.Sub(l.first) >= settle {
			ready = l.idx
		}
	}
	return ready
}

type lateInterval struct {
	idx   int64
	first time.Time
}
