package coordinator

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/weirhq/weir/internal/control/demand"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/allocate"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/sharepolicy"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Bounds on what the planner keeps, so that no report can make it grow
// without limit.
const (
	// MaxKeysPerRule caps the keys of one rule with shares of their own.
	MaxKeysPerRule = 10_000
	// MaxEntries caps rules plus keys.
	MaxEntries = 200_000
	// MaxKeyLen caps a key's length in bytes.
	MaxKeyLen = 4096
	// MaxInstances caps the instances whose sequences are remembered.
	MaxInstances = 100_000
	// maxCount bounds any count in a report: far more than any instance
	// decides in an interval.
	maxCount = 1e12
	ring     = 4 // intervals of reports kept per (entry, DC)
	heardLen = 8 // intervals remembered per DC
)

// ErrReport marks a report the planner refused; the caller logs it, counts
// it and goes on.
var ErrReport = errors.New("coordinator: report refused")

// PlannerConfig configures a Planner.
type PlannerConfig struct {
	// DCs are every DC's name. Required; reports from others are refused.
	DCs []string
	// Interval is the reporting interval. Default 1s.
	Interval time.Duration
	// TTL is how long an assignment lease keeps a DC's shares in force.
	// Default 5 × Interval.
	TTL time.Duration
	// Skew is the clock skew tolerated between coordinator and limiters.
	// Default 1s.
	Skew time.Duration
	// Warmup is how many intervals a new leader observes before it moves
	// any share. Default 3.
	Warmup int
	// Retire is how many intervals a key's own share outlives its
	// pressure. Default 30.
	Retire int
	// MaxQuarantine caps how long quota a DC released stays unusable by
	// the others after the release is in force. A rule's quarantine is its
	// window, up to this cap: a DC may have admitted up to its old local
	// limit within the last window, and another DC growing before the
	// window has passed could admit that quota again (docs/architecture.md).
	// Default 10 × Interval.
	MaxQuarantine time.Duration
	// TakeoverGrace is how long a new leader renews the leases of the DCs
	// whose lease it found valid, before it hears from them through Kafka
	// (joining the consumer group may take a session timeout). Default 10s.
	TakeoverGrace time.Duration
	// Estimator configures the demand estimates.
	Estimator demand.Config
}

func (c *PlannerConfig) setDefaults() {
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.TTL <= 0 {
		c.TTL = 5 * c.Interval
	}
	if c.Skew <= 0 {
		c.Skew = time.Second
	}
	if c.Warmup <= 0 {
		c.Warmup = 3
	}
	if c.Retire <= 0 {
		c.Retire = 30
	}
	if c.MaxQuarantine <= 0 {
		c.MaxQuarantine = 10 * c.Interval
	}
	if c.TakeoverGrace <= 0 {
		c.TakeoverGrace = 10 * time.Second
	}
}

// Planner is the coordinator's pure core: it turns usage reports into
// demand estimates, shares, and the two-phase schedule of writes that keeps
// the shares in force summing to at most 1 (docs/architecture.md). It does
// no I/O and reads no clock: the caller passes times, feeds reports, acks
// and write outcomes, and performs the writes it is given. Not safe for
// concurrent use.
type Planner struct {
	cfg        PlannerConfig
	intervalMs int64
	est        *demand.Estimator
	dcs        []string
	dcIndex    map[string]int
	dc         []dcState
	rules      map[ruleRef]*ruleState
	entries    int
	seqs       map[string]*seqWindow
	epoch      uint64
	started    int64 // first interval closed as leader; -1 until then
	closed     int64 // last interval closed
	now        time.Time
	usage      *usageStats
	stats      Stats
}

// Stats counts what the planner saw and refused.
type Stats struct {
	Reports      uint64 `json:"reports"`
	Duplicates   uint64 `json:"duplicates"`
	Refused      uint64 `json:"refused"`
	UnknownRules uint64 `json:"unknown_rules"`
	// LateReports counts reports that came after their interval was
	// closed. The newest late interval of a DC still feeds the estimates,
	// in the next interval to close (see Ingest), unless the estimates
	// have seen a later interval of that DC.
	LateReports uint64 `json:"late_reports"`
	// BlindIntervals counts intervals closed without a report from any
	// DC: the estimates held still through them.
	BlindIntervals uint64 `json:"blind_intervals"`
	KeysUntracked  uint64 `json:"keys_untracked"`
	Writes         uint64 `json:"writes"`
	WriteFailures  uint64 `json:"write_failures"`
}

type ruleRef struct{ domain, id string }

type dcState struct {
	heard   [heardLen]int64 // interval indexes heard from, by idx % heardLen
	heardAt time.Time
	// observed is the newest interval of the DC's the estimates have
	// seen, on time or late; late reports of it or older are only counted.
	observed int64
	// late holds the two newest late intervals reported (by idx % 2) and
	// when the first report of each came; lateAt is when the last one came.
	late       [2]lateInterval
	lateAt     time.Time
	leaseUntil time.Time // valid_until of the last lease written
	expired    bool
	ack        int64 // every instance of the DC has applied up to here
	acks       []ackSample
}

type lateInterval struct {
	idx   int64
	first time.Time
}

type ackSample struct {
	rev int64
	at  time.Time
}

type ruleState struct {
	ref      ruleRef
	wait     time.Duration // quarantine of released quota
	spec     rule.Rule
	static   []float64
	policy   []allocate.DC
	entry    *entry
	keys     map[string]*entry
	dirty    []bool // the DC's document must be rewritten
	hasDoc   []bool
	docEpoch []uint64
}

// entry is a rule, or one key of it with shares of its own.
type entry struct {
	key    string // "" for the rule
	limit  int64
	est    []demand.State
	pend   [][ring]pending
	late   [][2]pending // per DC: the two newest late intervals' sums, by idx % 2
	target []float64
	grant  []float64 // in the DC's document (or static)
	// hist holds, per DC, the writes the DC may not have applied yet: the
	// first was in force at some revision the DC has acknowledged, the
	// others came later. Whatever the DC enforces is one of them.
	hist     [][]write
	next     []float64 // grants of the write in flight
	quiet    int       // intervals without pressure (keys)
	retiring bool
}

type write struct {
	rev   int64 // math.MaxInt64 while unknown (a write whose outcome is unknown)
	share float64
}

// maxHist bounds the writes remembered per (entry, DC); older ones merge,
// conservatively, into the first.
const maxHist = 16

type pending struct {
	idx int64
	sum float64
}

type seqWindow struct {
	max  uint64
	bits uint64 // bit i: max-i seen
	seen int64  // interval of the last report
}

// NewPlanner returns a planner for the DCs of cfg.
func NewPlanner(cfg PlannerConfig) (*Planner, error) {
	cfg.setDefaults()
	if len(cfg.DCs) == 0 {
		return nil, errors.New("coordinator: no DCs configured")
	}
	if len(cfg.DCs) > allocate.MaxStackDCs {
		return nil, fmt.Errorf("coordinator: %d DCs; at most %d", len(cfg.DCs), allocate.MaxStackDCs)
	}
	est, err := demand.New(cfg.Estimator)
	if err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	p := &Planner{
		cfg: cfg, intervalMs: cfg.Interval.Milliseconds(), est: est,
		dcs: slices.Clone(cfg.DCs), dcIndex: map[string]int{},
		rules: map[ruleRef]*ruleState{}, seqs: map[string]*seqWindow{},
		started: -1, usage: newUsageStats(),
	}
	if p.intervalMs <= 0 {
		return nil, fmt.Errorf("coordinator: interval %v is under 1ms", cfg.Interval)
	}
	for i, d := range p.dcs {
		if err := rule.CheckDC(d); err != nil {
			return nil, fmt.Errorf("coordinator: %w", err)
		}
		if _, dup := p.dcIndex[d]; dup {
			return nil, fmt.Errorf("coordinator: DC %q listed twice", d)
		}
		p.dcIndex[d] = i
	}
	p.dc = make([]dcState, len(p.dcs))
	for i := range p.dc {
		for j := range p.dc[i].heard {
			p.dc[i].heard[j] = -1
		}
		p.dc[i].observed = -1
		p.dc[i].late = [2]lateInterval{{idx: -1}, {idx: -1}}
	}
	return p, nil
}

// DCs returns the DCs' names, in the order of every per-DC slice.
func (p *Planner) DCs() []string { return p.dcs }

// Stats returns the counters.
func (p *Planner) Stats() Stats { return p.stats }

// Epoch returns the epoch of the last round.
func (p *Planner) Epoch() uint64 { return p.epoch }

func (p *Planner) newEntry(key string, limit int64) *entry {
	n := len(p.dcs)
	e := &entry{
		key: key, limit: limit,
		est: make([]demand.State, n), pend: make([][ring]pending, n), late: make([][2]pending, n),
		target: make([]float64, n), grant: make([]float64, n), hist: make([][]write, n),
	}
	for d := range e.pend {
		for j := range e.pend[d] {
			e.pend[d][j].idx = -1
		}
		e.late[d] = [2]pending{{idx: -1}, {idx: -1}}
	}
	p.entries++
	return e
}

// SetRules sets the global rules to plan for; rules that are not global or
// not enabled are ignored. A rule dropped from the set keeps its documents
// in etcd until it returns (the limiters no longer match it).
func (p *Planner) SetRules(rules []rule.Rule) {
	keep := map[ruleRef]bool{}
	for _, r := range rules {
		if r.Scope != rule.ScopeGlobal || !r.Enabled || r.Unlimited {
			continue
		}
		ref := ruleRef{r.Domain, r.ID}
		keep[ref] = true
		rs := p.rules[ref]
		if rs == nil {
			if p.entries >= MaxEntries {
				continue
			}
			rs = &ruleState{ref: ref, keys: map[string]*entry{},
				dirty: make([]bool, len(p.dcs)), hasDoc: make([]bool, len(p.dcs)), docEpoch: make([]uint64, len(p.dcs)),
				policy: make([]allocate.DC, len(p.dcs)), static: make([]float64, len(p.dcs))}
			rs.entry = p.newEntry("", r.Limit)
			p.rules[ref] = rs
		}
		rs.spec = r
		rs.wait = min(r.Window(), p.cfg.MaxQuarantine)
		rs.entry.limit = r.Limit
		for d, name := range p.dcs {
			rs.static[d] = r.StaticShare(name, p.dcs)
			if !rs.hasDoc[d] {
				// Without a document the DC enforces its static share; it
				// stays the target until the estimates say otherwise.
				rs.entry.grant[d], rs.entry.target[d] = rs.static[d], rs.static[d]
				rs.entry.hist[d] = []write{{0, rs.static[d]}}
			}
		}
	}
	for ref, rs := range p.rules {
		if !keep[ref] {
			p.entries -= 1 + len(rs.keys)
			delete(p.rules, ref)
		}
	}
}

// SetPolicy sets the operator's settings of a rule's shares, by DC name;
// nil clears them. It reports an error, and changes nothing, when the rule
// is unknown or a setting is invalid.
func (p *Planner) SetPolicy(domain, ruleID string, pol sharepolicy.Policy) error {
	rs := p.rules[ruleRef{domain, ruleID}]
	if rs == nil {
		return fmt.Errorf("coordinator: policy for unknown global rule %s/%s", domain, ruleID)
	}
	dcs, err := pol.Settings(p.dcs)
	if err != nil {
		return err
	}
	copy(rs.policy, dcs)
	return nil
}

// Ingest accounts for one usage report received at now. A refused report
// changes nothing and returns an error wrapping ErrReport; a duplicate
// returns nil and changes nothing.
func (p *Planner) Ingest(r *weirv1.UsageReport, now time.Time) error {
	d, ok := p.dcIndex[r.GetDc()]
	switch {
	case !ok:
		return p.refuse("unknown DC %q", r.GetDc())
	case r.GetInstance() == "" || len(r.GetInstance()) > 256:
		return p.refuse("instance id of %d bytes", len(r.GetInstance()))
	case r.GetSequence() == 0:
		return p.refuse("sequence 0")
	case r.GetIntervalMs() <= 0 || r.GetIntervalMs() > 3600_000:
		return p.refuse("interval of %d ms", r.GetIntervalMs())
	}
	idx := r.GetIntervalStartMs() / p.intervalMs
	nowIdx := now.UnixMilli() / p.intervalMs
	if skew := p.cfg.Skew.Milliseconds()/p.intervalMs + 1; idx > nowIdx+skew {
		return p.refuse("interval starting %d ms from now", r.GetIntervalStartMs()-now.UnixMilli())
	}
	if p.duplicate(r.GetInstance(), r.GetSequence(), nowIdx) {
		p.stats.Duplicates++
		return nil
	}
	p.stats.Reports++
	ds := &p.dc[d]
	ds.heardAt = now
	// Reports of intervals already closed still prove the DC alive and
	// count in the statistics. When reports lag (Kafka behind, a consumer
	// catching up) every report may come after its interval closed: late
	// reports are summed per interval, and the newest late interval whose
	// reports have had lateSettle to gather (the DC's other instances, a
	// report split in parts) stands in for the DC in the next interval to
	// close, unless the estimates have seen a later interval of the DC.
	// So estimates follow lagging demand a few intervals behind instead of
	// freezing.
	late := idx <= p.closed && p.started >= 0
	stale := false
	switch {
	case !late:
		ds.heard[idx%heardLen] = idx
	case idx <= ds.observed:
		p.stats.LateReports++
		stale = true
	default:
		p.stats.LateReports++
		ds.lateAt = now
		switch l := &ds.late[idx%2]; {
		case l.idx < idx:
			*l = lateInterval{idx: idx, first: now}
		case l.idx > idx:
			stale = true // two newer late intervals are already gathering
		}
	}
	scale := float64(p.intervalMs) / float64(r.GetIntervalMs())
	for _, ru := range r.GetRules() {
		ref := ruleRef{ru.GetDomain(), ru.GetRuleId()}
		rs := p.rules[ref]
		if rs == nil {
			p.stats.UnknownRules++
			continue
		}
		if !countsOK(ru.GetOffered(), ru.GetAdmitted(), ru.GetRejected()) {
			p.stats.Refused++
			continue
		}
		p.usage.add(ref, r.GetDc(), idx, ru, now)
		if stale {
			continue
		}
		put := add
		if late {
			put = addLate
		}
		put(rs.entry, d, idx, p.fraction(float64(ru.GetOffered())*scale, rs.entry.limit, rs.spec.WindowSeconds))
		for _, k := range ru.GetKeys() {
			p.ingestKey(rs, d, idx, k, scale, put)
		}
	}
	return nil
}

func (p *Planner) ingestKey(rs *ruleState, d int, idx int64, k *weirv1.KeyUsage, scale float64, put func(*entry, int, int64, float64)) {
	key, limit := k.GetKey(), k.GetLimit()
	if key == "" || len(key) > MaxKeyLen || limit <= 0 || limit > algorithm.MaxLimit || !countsOK(k.GetOffered(), k.GetAdmitted(), k.GetRejected()) {
		p.stats.Refused++
		return
	}
	f := p.fraction(float64(k.GetOffered())*scale, limit, rs.spec.WindowSeconds)
	e := rs.keys[key]
	if e == nil {
		// A key earns a share of its own when it uses at least half of
		// what the rule's share gives it here, or is rejected.
		if (f < rs.entry.grant[d]/2 && k.GetRejected() == 0) || len(rs.keys) >= MaxKeysPerRule || p.entries >= MaxEntries {
			p.stats.KeysUntracked++
			return
		}
		e = p.newEntry(key, limit)
		for i := range p.dcs {
			// Until its own shares are written, each DC enforces the
			// rule's for the key.
			e.grant[i], e.hist[i] = rs.entry.grant[i], slices.Clone(rs.entry.hist[i])
			e.target[i] = rs.entry.grant[i]
		}
		rs.keys[key] = e
	}
	e.limit = limit
	put(e, d, idx, f)
}

// fraction converts an offered count per interval into a fraction of limit
// per window.
func (p *Planner) fraction(offered float64, limit, windowSeconds int64) float64 {
	if limit <= 0 || windowSeconds <= 0 {
		return 0
	}
	perInterval := float64(limit) * float64(p.intervalMs) / float64(windowSeconds*1000)
	return offered / perInterval
}

func add(e *entry, d int, idx int64, f float64) {
	slot := &e.pend[d][idx%ring]
	if slot.idx != idx {
		*slot = pending{idx: idx}
	}
	slot.sum += f
}

// addLate adds f, from a late report of interval idx, to the entry's late
// sum of that interval for DC d.
func addLate(e *entry, d int, idx int64, f float64) {
	l := &e.late[d][idx%2]
	switch {
	case idx > l.idx:
		*l = pending{idx: idx, sum: f}
	case idx == l.idx:
		l.sum += f
	}
}

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

func countsOK(offered, admitted, rejected uint64) bool {
	return offered <= maxCount && admitted <= offered && rejected <= offered && admitted+rejected <= offered+offered/100+1
}

func (p *Planner) refuse(format string, args ...any) error {
	p.stats.Refused++
	return fmt.Errorf("%w: %s", ErrReport, fmt.Sprintf(format, args...))
}

// duplicate reports whether (instance, seq) was seen, remembering it. It
// remembers the last 64 sequences of each instance; older ones count as
// duplicates.
func (p *Planner) duplicate(instance string, seq uint64, nowIdx int64) bool {
	w := p.seqs[instance]
	if w == nil {
		if len(p.seqs) >= MaxInstances {
			p.forgetInstances(nowIdx)
		}
		w = &seqWindow{}
		p.seqs[instance] = w
	}
	w.seen = nowIdx
	switch {
	case seq > w.max:
		shift := seq - w.max
		if shift >= 64 {
			w.bits = 0
		} else {
			w.bits <<= shift
		}
		w.bits |= 1
		w.max = seq
		return false
	case w.max-seq >= 64:
		return true
	default:
		bit := uint64(1) << (w.max - seq)
		if w.bits&bit != 0 {
			return true
		}
		w.bits |= bit
		return false
	}
}

// forgetInstances drops the instances not heard from for an hour, or the
// oldest half when none is that old.
func (p *Planner) forgetInstances(nowIdx int64) {
	hour := int64(time.Hour/time.Millisecond) / p.intervalMs
	for k, w := range p.seqs {
		if nowIdx-w.seen > hour {
			delete(p.seqs, k)
		}
	}
	if len(p.seqs) < MaxInstances {
		return
	}
	seen := make([]int64, 0, len(p.seqs))
	for _, w := range p.seqs {
		seen = append(seen, w.seen)
	}
	slices.Sort(seen)
	cut := seen[len(seen)/2]
	for k, w := range p.seqs {
		if w.seen <= cut {
			delete(p.seqs, k)
		}
	}
}

// SetAck records that, as of now, every live instance of dc has applied
// its assignments up to etcd revision rev (the caller takes the minimum over
// the DC's instances, and over instances lost too recently to be sure they
// stopped). A DC with no instance acknowledges everything: pass
// math.MaxInt64.
func (p *Planner) SetAck(dc string, rev int64, now time.Time) {
	d, ok := p.dcIndex[dc]
	if !ok {
		return
	}
	ds := &p.dc[d]
	ds.ack = rev
	if n := len(ds.acks); n == 0 || ds.acks[n-1].rev != rev {
		ds.acks = append(ds.acks, ackSample{rev, now})
	}
	// Keep the samples of the longest quarantine, and the one in force
	// before it.
	horizon := now.Add(-p.cfg.MaxQuarantine)
	i := 0
	for j := range ds.acks {
		if !ds.acks[j].at.After(horizon) {
			i = j
		}
	}
	if i > 0 {
		ds.acks = append(ds.acks[:0], ds.acks[i:]...)
	}
}

// ackSince returns the revision DC d has had applied throughout the last
// wait: its acknowledgement in force wait ago, or a lower one since.
func (p *Planner) ackSince(d int, wait time.Duration) int64 {
	ds := &p.dc[d]
	if wait <= 0 {
		return ds.ack
	}
	horizon := p.now.Add(-wait)
	ack := int64(0)
	for _, a := range ds.acks {
		if !a.at.After(horizon) {
			ack = a.rev
		} else {
			ack = min(ack, a.rev)
		}
	}
	return ack
}

// Tick closes the intervals that ended before now (minus a grace of
// 40% of an interval for reports in flight), updates the estimates and the
// targets, and notices DCs whose lease ran out. Call it about every
// interval; the first call after Load starts the warm-up.
func (p *Planner) Tick(now time.Time) {
	p.now = now
	ms := now.UnixMilli() - p.intervalMs*4/10
	last := ms/p.intervalMs - 1 // the last interval that ended before ms
	if p.started < 0 {
		p.started, p.closed = last, last
		p.expire(now)
		return
	}
	for idx := p.closed + 1; idx <= last; idx++ {
		p.close(idx)
	}
	if last > p.closed {
		p.closed = last
	}
	p.expire(now)
	p.retarget()
}

func (p *Planner) heard(d int, idx int64) bool { return p.dc[d].heard[idx%heardLen] == idx }

// lostGrace is how many intervals before a silent one are looked at: when
// DC d was heard in one of them, its report for this interval was lost
// (Kafka drops, a consumer rebalance) and the interval is skipped, not
// counted as no demand. Lost reports are then merely unseen, and the
// estimate stays unbiased under random loss; a DC silent for longer
// decays as before, and one silent past its lease is expired.
const lostGrace = 2

// heardWithin reports whether DC d was heard in one of the n intervals
// before idx.
func (p *Planner) heardWithin(d int, idx int64, n int64) bool {
	for i := idx - n; i < idx; i++ {
		if p.heard(d, i) {
			return true
		}
	}
	return false
}

// close feeds interval idx's sums to the estimates. An interval no DC
// was heard from is blind: the usage pipeline (Kafka, or this coordinator's
// consumer) failed, not every DC's demand at once, so the estimates hold
// instead of decaying as they do for one silent DC.
func (p *Planner) close(idx int64) {
	blind := true
	// ready[d]: the late interval standing in for DC d, or -1.
	ready := make([]int64, len(p.dcs))
	for d := range p.dcs {
		ready[d] = -1
		if !p.heard(d, idx) {
			ready[d] = p.lateReady(d)
		}
		if p.heard(d, idx) || ready[d] >= 0 {
			blind = false
		}
	}
	if blind {
		p.stats.BlindIntervals++
	}
	for _, rs := range p.rules {
		p.closeEntry(rs.entry, idx, blind, ready)
		for _, e := range rs.keys {
			p.closeEntry(e, idx, blind, ready)
		}
	}
	for d := range p.dc {
		switch {
		case p.heard(d, idx):
			p.dc[d].observed = idx
		case ready[d] >= 0:
			p.dc[d].observed = ready[d]
		}
	}
}

// closeEntry feeds DC d's sum for interval idx to e's estimate: the
// interval's own reports; else, when a late interval of the DC is ready
// (ready[d], see lateReady), the entry's sum in it, or nothing; else a
// hold or a decay, as the DC was last heard.
func (p *Planner) closeEntry(e *entry, idx int64, blind bool, ready []int64) {
	for d := range p.dcs {
		slot := &e.pend[d][idx%ring]
		switch {
		case slot.idx == idx:
			p.est.Observe(&e.est[d], idx, slot.sum)
		case p.heard(d, idx):
			p.est.Observe(&e.est[d], idx, 0)
		case ready[d] >= 0:
			sum := 0.0
			if l := e.late[d][ready[d]%2]; l.idx == ready[d] {
				sum = l.sum
			}
			p.est.Observe(&e.est[d], idx, sum)
		case blind || p.heardWithin(d, idx, lostGrace) || p.heardLateWithin(d, lostGrace):
			p.est.Hold(&e.est[d], idx)
		default:
			p.est.Advance(&e.est[d], idx)
		}
		if slot.idx <= idx {
			slot.idx = -1
		}
	}
}

// heardLateWithin reports whether a late report of DC d came within the
// last n intervals: its reports lag, they are not lost.
func (p *Planner) heardLateWithin(d int, n int64) bool {
	at := p.dc[d].lateAt
	return !at.IsZero() && p.now.Sub(at) <= time.Duration(n*p.intervalMs)*time.Millisecond
}

// expire notices the DCs whose lease has run out for sure: their limiters
// enforce at most min(static, assigned) now, so that is all they may hold,
// and the other DCs may grow into the rest.
func (p *Planner) expire(now time.Time) {
	for d := range p.dc {
		ds := &p.dc[d]
		if ds.leaseUntil.IsZero() || ds.expired || !now.After(ds.leaseUntil.Add(p.cfg.Skew)) {
			continue
		}
		ds.expired = true
	}
}

// each calls f for every entry.
func (p *Planner) each(f func(rs *ruleState, e *entry)) {
	for _, rs := range p.rules {
		f(rs, rs.entry)
		for _, e := range rs.keys {
			f(rs, e)
		}
	}
}

// retarget computes every entry's target shares from the estimates.
func (p *Planner) retarget() {
	if p.closed-p.started < int64(p.cfg.Warmup) {
		return // a new leader first learns the demand
	}
	n := len(p.dcs)
	in := make([]allocate.DC, n)
	out := make([]float64, n)
	for _, rs := range p.rules {
		if len(rs.spec.KeyType) > 0 {
			p.allocateKeyed(rs, in, out)
		} else {
			p.allocate(rs, rs.entry, in, out)
		}
		for key, e := range rs.keys {
			pressured := false
			for d := range p.dcs {
				if e.est[d].Estimate() > rs.entry.grant[d]/2 {
					pressured = true
				}
			}
			if pressured {
				e.quiet, e.retiring = 0, false
			} else if e.quiet++; e.quiet > p.cfg.Retire {
				e.retiring = true
			}
			if e.retiring {
				copy(e.target, rs.entry.target)
				if p.retired(rs, e) {
					delete(rs.keys, key)
					p.entries--
					for d := range rs.dirty {
						rs.dirty[d] = true
					}
				}
				continue
			}
			p.allocate(rs, e, in, out)
		}
	}
}

func (p *Planner) allocate(rs *ruleState, e *entry, in []allocate.DC, out []float64) {
	copy(in, rs.policy)
	for d := range in {
		in[d].Demand = e.est[d].Estimate()
	}
	allocate.Allocate(in, out)
	copy(e.target, out)
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
	copy(rs.entry.target, out)
}

// retired reports whether key entry e can leave the documents: its shares
// equal the rule's in every DC, and are the only ones that may be in force.
func (p *Planner) retired(rs *ruleState, e *entry) bool {
	for d := range p.dcs {
		if e.grant[d] != rs.entry.grant[d] || len(e.hist[d]) != 1 || e.next != nil {
			return false
		}
	}
	return true
}

// Write is one document to write: a DC's assignment of a rule.
type Write struct {
	DC, Domain, RuleID string
	Doc                *weirv1.RuleAssignment
}

// Plan applies the acknowledgements and computes the next grants of every
// entry (two-phase: shrinks at once; grows only into quota no other DC may
// still hold), and returns the documents that change, marked in flight.
// The caller writes them and reports each outcome with Written. Plan with
// writes in flight returns nothing.
func (p *Planner) Plan(now time.Time) []Write {
	p.now = now
	if p.inFlight() {
		return nil
	}
	for _, rs := range p.rules {
		p.step(rs, rs.entry)
		for _, e := range rs.keys {
			p.step(rs, e)
		}
	}
	p.epoch++
	var ws []Write
	refs := make([]ruleRef, 0, len(p.rules))
	for ref := range p.rules {
		refs = append(refs, ref)
	}
	sort.Slice(refs, func(i, j int) bool {
		return refs[i].domain < refs[j].domain || refs[i].domain == refs[j].domain && refs[i].id < refs[j].id
	})
	for _, ref := range refs {
		rs := p.rules[ref]
		for d, dc := range p.dcs {
			if !rs.dirty[d] && !p.changed(rs, d) {
				continue
			}
			ws = append(ws, Write{DC: dc, Domain: ref.domain, RuleID: ref.id, Doc: p.doc(rs, d, now)})
		}
	}
	if len(ws) == 0 {
		p.epoch--
	}
	return ws
}

func (p *Planner) inFlight() bool {
	for _, rs := range p.rules {
		if rs.entry.next != nil {
			return true
		}
		for _, e := range rs.keys {
			if e.next != nil {
				return true
			}
		}
	}
	return false
}

// changed reports whether DC d's document of rs must change.
func (p *Planner) changed(rs *ruleState, d int) bool {
	if rs.entry.next[d] != rs.entry.grant[d] || !rs.hasDoc[d] && rs.entry.next[d] != rs.static[d] {
		return true
	}
	for _, e := range rs.keys {
		if e.next[d] != e.grant[d] || !rs.hasDoc[d] {
			return true
		}
	}
	return false
}

// step applies the acknowledgements to e and sets e.next.
func (p *Planner) step(rs *ruleState, e *entry) {
	n := len(p.dcs)
	if p.settled(rs, e) {
		e.next = e.grant // nothing to move: most entries, most rounds
		return
	}
	var heldBuf [allocate.MaxStackDCs]float64
	held := heldBuf[:n]
	for d := range n {
		held[d] = p.held(rs, e, d)
	}
	next := make([]float64, n)
	for d := range n {
		// Shrinks at once, and grows free of charge up to what the DC may
		// hold already. A DC whose lease ran out only shrinks: it must fit
		// in what it holds before its lease is renewed.
		next[d] = min(e.target[d], e.grant[d])
		if p.dc[d].expired {
			next[d] = min(next[d], held[d])
		} else {
			next[d] = max(next[d], min(e.target[d], held[d]))
		}
	}
	// Grows: into the room no DC may hold, shared in proportion to what
	// each DC still wants.
	sum, want := 0.0, 0.0
	for d := range n {
		sum += p.bound(rs, d, held[d], next[d])
		if !p.dc[d].expired {
			want += max(0, e.target[d]-max(held[d], next[d]))
		}
	}
	if room := 1 - sum; room > 0 && want > 0 {
		f := min(1, room/want)
		for d := range n {
			if w := e.target[d] - max(held[d], next[d]); w > 0 && !p.dc[d].expired {
				next[d] = min(e.target[d], max(held[d], next[d])+w*f)
			}
		}
	}
	// Float rounding must not take the sum above 1: trim the grows.
	for range 4 {
		s := 0.0
		for d := range n {
			s += p.bound(rs, d, held[d], next[d])
		}
		if s <= 1 {
			break
		}
		over := s - 1
		for d := n - 1; d >= 0 && over > 0; d-- {
			if floor := max(held[d], min(e.target[d], e.grant[d])); next[d] > floor {
				cut := min(over*(1+1e-9)+1e-15, next[d]-floor)
				next[d] -= cut
				over -= cut
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

// bound is the most DC d may enforce of an entry of rs that it may hold
// up to held, once next is written.
func (p *Planner) bound(rs *ruleState, d int, held, next float64) float64 {
	if p.dc[d].expired {
		return max(held, min(rs.static[d], next))
	}
	return max(held, next)
}

// held prunes e's writes in DC d to those the DC may still enforce, given
// its acknowledgement, and returns the most it may enforce: the largest of
// them, or, while its lease has run out, no more than its static share.
func (p *Planner) held(rs *ruleState, e *entry, d int) float64 {
	h := e.hist[d]
	// Released quota counts as held until the release has been in force
	// for the rule's quarantine.
	ack := p.ackSince(d, rs.wait)
	i := 0
	for j := range h {
		if h[j].rev <= ack {
			i = j
		}
	}
	if i > 0 {
		h = append(h[:0], h[i:]...)
		e.hist[d] = h
	}
	m := 0.0
	for _, w := range h {
		m = max(m, w.share)
	}
	if p.dc[d].expired {
		return min(rs.static[d], m)
	}
	return m
}

// doc builds DC d's document of rs from the grants in flight.
func (p *Planner) doc(rs *ruleState, d int, now time.Time) *weirv1.RuleAssignment {
	doc := &weirv1.RuleAssignment{
		Dc: p.dcs[d], Domain: rs.ref.domain, RuleId: rs.ref.id,
		Epoch: p.epoch, Share: rs.entry.next[d], IssuedMs: now.UnixMilli(),
	}
	keys := make([]string, 0, len(rs.keys))
	for k := range rs.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		doc.Keys = append(doc.Keys, &weirv1.KeyShare{Key: k, Share: rs.keys[k].next[d]})
	}
	return doc
}

// Written reports the outcome of writing ws (a part of what Plan returned):
// ok with the revision of the write, or not ok when the write failed or
// its outcome is unknown. Call it for every Write Plan returned, then
// Settle.
func (p *Planner) Written(ws []Write, rev int64, ok bool) {
	if ok {
		p.stats.Writes += uint64(len(ws))
	} else {
		p.stats.WriteFailures += uint64(len(ws))
	}
	for _, w := range ws {
		rs := p.rules[ruleRef{w.Domain, w.RuleID}]
		d, known := p.dcIndex[w.DC]
		if rs == nil || !known {
			continue
		}
		apply := func(e *entry, share float64) {
			h := e.hist[d]
			if ok {
				for j := range h {
					if h[j].rev == math.MaxInt64 {
						h[j].rev = rev - 1 // it happened, if at all, before rev
					}
				}
				if share != e.grant[d] || len(h) == 0 || !rs.hasDoc[d] {
					h = append(h, write{rev, share})
				}
				e.grant[d] = share
			} else {
				// It may or may not be in force; only a later successful
				// write can be acknowledged.
				h = append(h, write{math.MaxInt64, share})
			}
			if len(h) > maxHist {
				h[1] = write{h[0].rev, max(h[0].share, h[1].share)}
				h = h[1:]
			}
			e.hist[d] = h
		}
		apply(rs.entry, w.Doc.GetShare())
		for _, k := range w.Doc.GetKeys() {
			if e := rs.keys[k.GetKey()]; e != nil {
				apply(e, k.GetShare())
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
	for _, rs := range p.rules {
		rs.entry.next = nil
		for _, e := range rs.keys {
			e.next = nil
		}
	}
}

// Leases returns the lease to write for each DC heard from since `since`,
// valid until now + TTL; the other DCs' leases run out. A DC whose lease
// has run out is renewed only once its documents fit in what it may hold
// and it has acknowledged them, so that renewing it cannot take the shares
// in force above 1.
func (p *Planner) Leases(now time.Time, since time.Time, leader string) []*weirv1.AssignmentLease {
	var out []*weirv1.AssignmentLease
	for d, dc := range p.dcs {
		if p.dc[d].heardAt.Before(since) || p.dc[d].expired && !p.renewable(d) {
			continue
		}
		out = append(out, &weirv1.AssignmentLease{
			Dc: dc, Epoch: p.epoch, ValidUntilMs: now.Add(p.cfg.TTL).UnixMilli(),
			TtlMs: p.cfg.TTL.Milliseconds(), Leader: leader,
		})
	}
	return out
}

func (p *Planner) renewable(d int) bool {
	ok := true
	p.each(func(rs *ruleState, e *entry) {
		p.held(rs, e, d)
		for _, w := range e.hist[d] {
			if w.share > rs.static[d] {
				ok = false
			}
		}
	})
	return ok
}

// LeaseWritten records that l was written.
func (p *Planner) LeaseWritten(l *weirv1.AssignmentLease) {
	d, ok := p.dcIndex[l.GetDc()]
	if !ok {
		return
	}
	ds := &p.dc[d]
	ds.leaseUntil = time.UnixMilli(l.GetValidUntilMs())
	if ds.expired {
		ds.expired = false
	}
}

// Load starts a new leader from what etcd holds: the documents (each with
// the revision that last modified it) and the leases. Call it once, after
// SetRules and before the first Tick. Until a DC acknowledges a document's
// revision, the planner assumes the DC may hold any share of it (a former
// leader may have written more since), so nothing grows into it.
func (p *Planner) Load(now time.Time, docs []*weirv1.RuleAssignment, revs []int64, leases []*weirv1.AssignmentLease) {
	for i, doc := range docs {
		p.epoch = max(p.epoch, doc.GetEpoch())
		rs := p.rules[ruleRef{doc.GetDomain(), doc.GetRuleId()}]
		d, ok := p.dcIndex[doc.GetDc()]
		if rs == nil || !ok {
			continue
		}
		load := func(e *entry, share float64) {
			// Until the DC acknowledges rev, it may hold anything.
			e.grant[d], e.target[d] = share, share
			e.hist[d] = []write{{0, 1}, {revs[i], share}}
		}
		rs.hasDoc[d], rs.docEpoch[d] = true, doc.GetEpoch()
		load(rs.entry, doc.GetShare())
		for _, k := range doc.GetKeys() {
			e := rs.keys[k.GetKey()]
			if e == nil {
				if len(rs.keys) >= MaxKeysPerRule || p.entries >= MaxEntries {
					continue
				}
				e = p.newEntry(k.GetKey(), rs.entry.limit)
				for j := range p.dcs {
					e.grant[j], e.target[j], e.hist[j] = rs.entry.grant[j], rs.entry.grant[j], nil
				}
				rs.keys[k.GetKey()] = e
			}
			load(e, k.GetShare())
		}
	}
	// A key listed in some DCs' documents but not others is at the rule's
	// share there; those DCs' grants were copied from the rule above only if
	// the rule's document came first, so copy them again.
	for _, rs := range p.rules {
		for _, e := range rs.keys {
			for d := range p.dcs {
				if e.hist[d] == nil {
					e.grant[d], e.target[d], e.hist[d] = rs.entry.grant[d], rs.entry.grant[d], slices.Clone(rs.entry.hist[d])
				}
			}
		}
	}
	for _, l := range leases {
		p.epoch = max(p.epoch, l.GetEpoch())
		if d, ok := p.dcIndex[l.GetDc()]; ok {
			p.dc[d].leaseUntil = time.UnixMilli(l.GetValidUntilMs())
			if p.dc[d].leaseUntil.After(now) {
				p.dc[d].heardAt = now.Add(p.cfg.TakeoverGrace)
			}
		}
	}
}

// RuleView is what the planner knows of one global rule, for operators.
type RuleView struct {
	Domain        string   `json:"domain"`
	RuleID        string   `json:"rule_id"`
	Limit         int64    `json:"limit"`
	WindowSeconds int64    `json:"window_seconds"`
	Keys          int      `json:"keys_with_shares"`
	DCs           []DCView `json:"dcs"`
}

// DCView is one DC's part of a rule or key.
type DCView struct {
	DC string `json:"dc"`
	// Demand is the estimated demand, a fraction of the limit.
	Demand float64 `json:"demand"`
	// Target is the share the allocation wants; Share is the share
	// written (in force once acknowledged); Held bounds what may be in
	// force meanwhile; Static is the safe static share.
	Target  float64              `json:"target"`
	Share   float64              `json:"share"`
	Held    float64              `json:"held"`
	Static  float64              `json:"static"`
	Expired bool                 `json:"lease_expired,omitempty"`
	Policy  sharepolicy.DCPolicy `json:"policy"`
}

// Snapshot returns every rule's state, sorted by domain and id.
func (p *Planner) Snapshot() []RuleView {
	out := make([]RuleView, 0, len(p.rules))
	for _, rs := range p.rules {
		v := RuleView{Domain: rs.ref.domain, RuleID: rs.ref.id, Limit: rs.spec.Limit, WindowSeconds: rs.spec.WindowSeconds, Keys: len(rs.keys)}
		v.DCs = p.dcViews(rs, rs.entry)
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Domain < out[j].Domain || out[i].Domain == out[j].Domain && out[i].RuleID < out[j].RuleID
	})
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
		out[d] = DCView{DC: dc, Demand: e.est[d].Estimate(), Target: e.target[d], Share: e.grant[d], Held: p.held(rs, e, d),
			Static: rs.static[d], Expired: p.dc[d].expired, Policy: pol}
	}
	return out
}
