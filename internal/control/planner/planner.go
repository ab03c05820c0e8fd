package planner

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/internal/control/demand"
	"github.com/weirhq/weir/pkg/allocate"
	"github.com/weirhq/weir/pkg/rule"
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
var ErrReport = errors.New("planner: report refused")

// Config configures a Planner.
type Config struct {
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
	// memory (algorithm.Params.Memory: the window, two for the sliding
	// counter, a full bucket's drain), up to this cap: what a DC admitted
	// under its old local limit weighs on decisions for that long, and
	// another DC growing before it has passed could admit that quota again
	// (docs/architecture.md). Default 10 × Interval.
	MaxQuarantine time.Duration
	// UsageAwareAbove is the memory (algorithm.Params.Memory: the window,
	// two for the sliding counter, a full bucket's drain) above which a
	// rule's limits follow what the DCs report they consumed
	// (docs/architecture.md, "Usage-aware limits"); shorter memories keep
	// the quarantine, which moves quota exactly for them. Default
	// MaxQuarantine; negative: every rule.
	UsageAwareAbove time.Duration
	// TakeoverGrace is how long past a takeover a DC whose lease the new
	// leader found valid counts as heard from, so that Leases renews it
	// before the leader hears from it through Kafka (joining the consumer
	// group may take a session timeout); Leases renews DCs heard from since
	// the time its caller passes. Default 10s.
	TakeoverGrace time.Duration
	// Estimator configures the demand estimates.
	Estimator demand.Config
	// Workers is how many goroutines a round spreads its rules over (each
	// rule is one goroutine's work; the result does not depend on how
	// many). Default GOMAXPROCS.
	Workers int
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
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
	if c.UsageAwareAbove == 0 {
		c.UsageAwareAbove = c.MaxQuarantine
	}
	if c.TakeoverGrace <= 0 {
		c.TakeoverGrace = 10 * time.Second
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
}

// Planner is the coordinator's pure core: it turns usage reports into
// demand estimates, shares, and the two-phase schedule of writes that keeps
// the shares in force summing to at most 1 (docs/architecture.md). It does
// no I/O and reads no clock: the caller passes times, feeds reports, acks
// and write outcomes, and performs the writes it is given. Not safe for
// concurrent use.
type Planner struct {
	cfg        Config
	intervalMs int64
	graceMs    int64 // Tick's wait for reports in flight (SetReportGrace)
	carried    int   // pruned writes remembered per (entry, DC): carriedFor
	est        *demand.Estimator
	dcs        []string
	dcIndex    map[string]int
	dc         []dcState
	rules      map[ruleRef]*ruleState
	entries    int
	seqs       map[string]*seqWindow
	epoch      uint64
	planned    bool  // a round is in flight: Plan has set the entries' next, Settle has not cleared it
	lastRev    int64 // the newest revision of a write known to have succeeded
	started    int64 // first interval closed as leader; -1 until then
	closed     int64 // last interval closed
	now        time.Time
	usage      *usageStats
	stats      Stats
	rereads    []rereadEntry // entries whose readings freed quota since the last Plan
	handouts   uint64        // Plans and Leases returned: numbers what they hand out (witness.go)
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
	// Readings counts readings-only reports accepted: readings sent
	// between interval reports (reread.go), not in Reports.
	Readings uint64 `json:"readings"`
	// BlindIntervals counts intervals closed without a report from any
	// DC: the estimates held still through them.
	BlindIntervals uint64 `json:"blind_intervals"`
	KeysUntracked  uint64 `json:"keys_untracked"`
	Writes         uint64 `json:"writes"`
	WriteFailures  uint64 `json:"write_failures"`
}

type ruleRef struct{ domain, id string }

type dcState struct {
	heard [heardLen]int64 // interval indexes heard from, by idx % heardLen
	// unheard counts the intervals closed since the DC was last heard (on
	// time, or a late interval standing in), less the blind ones, up to
	// lostGrace; lostGrace for a DC never heard.
	unheard int
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
	expiredAt  time.Time // when the planner saw the lease surely run out
	ack        int64     // every instance of the DC has applied up to here
	acks       []ackSample
	// witnesses are the first writes to the DC's documents of its last
	// hand-outs; wanted, if not 0, is the first hand-out whose write would
	// witness a release waiting for one (witness.go).
	witnesses []witness
	wanted    atomic.Uint64
}

type ruleState struct {
	ref      ruleRef
	wait     time.Duration // quarantine of released quota
	memory   time.Duration // how long an admission weighs on the rule's decisions
	spec     rule.Rule
	policy   []allocate.DC
	entry    *entry
	keys     map[string]*entry
	dirty    []bool // the DC's document must be rewritten
	hasDoc   []bool
	docEpoch []uint64
	docKeys  []*entry // the keys' entries in the order of the last Plan's documents, until Settle
}

// entry is a rule, or one key of it with shares of its own. Its targets,
// grants and writes are local limits: integers out of limit, the entry's
// global limit (docs/architecture.md, "Safety").
type entry struct {
	key   string // "" for the rule
	limit int64
	est   []demand.State
	pend  [][ring]pending
	late  [][2]pending // per DC: the two newest late intervals' sums, by idx % 2
	// share is the allocator's target share; target is it apportioned in
	// integers that sum to limit (allocate.Apportion).
	share  []float64
	target []int64
	grant  []int64 // in the DC's document (or static)
	static []int64 // the DCs' static limits of limit (rule.StaticLimit)
	// hist holds, per DC, the writes the DC may not have applied yet: the
	// first was in force at some revision the DC has acknowledged, the
	// others came later. Whatever the DC enforces is one of them.
	hist [][]write
	next []int64 // grants of the write in flight
	// used holds, per DC, its latest report of what it consumed in the
	// window; carry, the pruned writes it may have consumed up to, each
	// until a reading younger than its release comes (consumed.go).
	used     []reading
	carry    [][]carried
	floor    []int64 // readings at or below floor (-1: none) predate a forget (consumed.go)
	quiet    int     // intervals without pressure (keys)
	retiring bool
	// stoppedAt, per DC: the interval its demand stopped in — its estimate
	// fell to 0 on an interval without requests — while it has sent none
	// since, else -1; startedAt: the last interval its estimate rose from
	// 0, or -1 (observeDemand, movedAway).
	stoppedAt, startedAt []int64
	// underservedSince: the first interval of the run of plans in which
	// some DC was underserved, else -1 (awareTargets).
	underservedSince int64
	// unread marks the rule-wide entry of a keyed rule with a long memory
	// (usage-aware, any algorithm): it stands for every key without a share
	// of its own, whose consumption no DC reads, so its pruned writes stay
	// held until they age out — a quarantine of the rule's whole memory
	// rather than the capped one (consumed.go).
	unread bool
	// aware: the last retarget made e's targets usage-aware (awareTargets),
	// congested being its argument; reread: readings between intervals
	// freed quota (freed, in units of limit) since the last tick, and e is
	// queued in Planner.rereads (reread.go).
	aware, congested, reread bool
	freed                    int64
}

// New returns a planner for the DCs of cfg.
func New(cfg Config) (*Planner, error) {
	cfg.setDefaults()
	if len(cfg.DCs) == 0 {
		return nil, errors.New("planner: no DCs configured")
	}
	if len(cfg.DCs) > allocate.MaxStackDCs {
		return nil, fmt.Errorf("planner: %d DCs; at most %d", len(cfg.DCs), allocate.MaxStackDCs)
	}
	est, err := demand.New(cfg.Estimator)
	if err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	p := &Planner{
		cfg: cfg, intervalMs: cfg.Interval.Milliseconds(), graceMs: cfg.Interval.Milliseconds() * DefaultGracePct / 100, carried: carriedFor(cfg.Interval, cfg.Skew), est: est,
		dcs: slices.Clone(cfg.DCs), dcIndex: map[string]int{},
		rules: map[ruleRef]*ruleState{}, seqs: map[string]*seqWindow{},
		started: -1, usage: newUsageStats(),
	}
	if p.intervalMs <= 0 {
		return nil, fmt.Errorf("planner: interval %v is under 1ms", cfg.Interval)
	}
	for i, d := range p.dcs {
		if err := rule.CheckDC(d); err != nil {
			return nil, fmt.Errorf("planner: %w", err)
		}
		if _, dup := p.dcIndex[d]; dup {
			return nil, fmt.Errorf("planner: DC %q listed twice", d)
		}
		p.dcIndex[d] = i
	}
	p.dc = make([]dcState, len(p.dcs))
	for i := range p.dc {
		for j := range p.dc[i].heard {
			p.dc[i].heard[j] = -1
		}
		p.dc[i].observed, p.dc[i].unheard = -1, lostGrace
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

func (p *Planner) newEntry(rs *ruleState, key string, limit int64) *entry {
	n := len(p.dcs)
	e := &entry{
		key: key, limit: limit,
		est: make([]demand.State, n), pend: make([][ring]pending, n), late: make([][2]pending, n),
		share: make([]float64, n), target: make([]int64, n), grant: make([]int64, n), static: make([]int64, n),
		hist: make([][]write, n),
		used: make([]reading, n), carry: make([][]carried, n), floor: make([]int64, n),
		stoppedAt: make([]int64, n), startedAt: make([]int64, n), underservedSince: -1,
	}
	for d := range e.floor {
		e.floor[d], e.stoppedAt[d], e.startedAt[d] = -1, -1, -1
	}
	p.setStatic(rs, e)
	for d := range e.pend {
		for j := range e.pend[d] {
			e.pend[d][j].idx = -1
		}
		e.late[d] = [2]pending{{idx: -1}, {idx: -1}}
	}
	p.entries++
	return e
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

// setStatic computes e's static limits: the DCs' static shares of the
// rule, apportioned in integers of e's limit.
func (p *Planner) setStatic(rs *ruleState, e *entry) {
	for d, dc := range p.dcs {
		e.static[d] = rs.spec.StaticLimit(dc, p.dcs, e.limit)
	}
}

// setLimit changes e's global limit to limit. What the DCs may enforce
// under their documents becomes rule.LocalLimit of the new limit — their
// integers, scaled and rounded down — and their documents are rewritten
// in the new limit's integers.
func (p *Planner) setLimit(rs *ruleState, e *entry, limit int64) {
	if e.limit == limit {
		return
	}
	from := e.limit
	e.limit = limit
	p.setStatic(rs, e)
	scale := func(v int64) int64 { return rule.LocalLimit(v, from, 0, limit) }
	for d := range p.dcs {
		e.grant[d], e.target[d] = scale(e.grant[d]), scale(e.target[d])
		for j := range e.hist[d] {
			e.hist[d][j].limit = scale(e.hist[d][j].limit)
		}
		rs.dirty[d] = true
	}
}
