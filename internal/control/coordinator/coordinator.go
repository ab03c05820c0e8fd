package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/internal/kafka/usagetopic"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/control/planner"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/platform/backoff"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Limits on what the coordinator reads.
const (
	// MaxReportBytes bounds a usage report message.
	MaxReportBytes = usagetopic.MaxMessageBytes
	// MaxDocBytes bounds an assignment document read from etcd.
	MaxDocBytes = 1 << 20
	// maxTxnOps and maxTxnBytes keep each etcd transaction well under
	// etcd's defaults (128 operations, 1.5 MiB).
	maxTxnOps   = 100
	maxTxnBytes = 1 << 20
)

// Source delivers usage reports: a member of the coordinators' consumer
// group of the usage topic (usagetopic.Consumer). Fetch blocks for the
// next message; Commit marks it processed. A Source is used by one
// goroutine at a time.
type Source interface {
	Fetch(ctx context.Context) (usagetopic.Message, error)
	Commit(ctx context.Context, m usagetopic.Message) error
	Close() error
}

// reportQueue bounds the decoded reports waiting for the leader's loop.
// While the loop writes to etcd the consumer goes on fetching and decoding
// into it; only a queue this full makes the consumer wait.
const reportQueue = 4096

// Config configures a Coordinator.
type Config struct {
	// Etcd is the client; required.
	Etcd *clientv3.Client
	// Layout names the keys.
	Layout etcdlayout.Layout
	// Name identifies this coordinator in the election and the leases.
	Name string
	// AdminURL is where this coordinator serves its admin API, published
	// with its candidacy so that standbys can send operators to the
	// leader. Optional.
	AdminURL string
	// Planner configures the planning: DCs (required), interval, TTL...
	Planner planner.Config
	// Rules returns the rules in force; the global ones are planned.
	Rules func() []rule.Rule
	// NewSource opens the usage consumer when this coordinator leads.
	NewSource func(ctx context.Context) (Source, error)
	// SessionTTL is the election session's TTL in seconds: a crashed
	// leader is replaced after it. Default 2.
	SessionTTL int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Shadows, when set, is the rule watcher whose shadow writes the
	// leader makes (a rulestore.Watcher with Config.Mirror), fenced by its
	// leadership like its other repairs, so that one coordinator at a
	// time writes them. Default nil: the leader mends no shadows.
	Shadows Shadows
	// LimiterClient carries KeyStatus's requests to the limiters' HTTP
	// APIs, at the scheme and address each instance advertises in etcd.
	// Its transport's TLS configuration says which limiter certificates
	// are trusted (RootCAs) and which certificate the coordinator
	// presents to limiters that require one (mutual TLS). Default: a
	// client with a DefaultLimiterTimeout timeout that trusts the
	// system's roots.
	LimiterClient *http.Client
}

// DefaultLimiterTimeout bounds one request of the default LimiterClient.
const DefaultLimiterTimeout = 2 * time.Second

// Coordinator campaigns for leadership and, while it leads, plans and
// writes the shares. Create it with New; Run drives it.
type Coordinator struct {
	cfg Config
	log *slog.Logger
	now func() time.Time

	leader atomic.Bool
	// mu guards the two fields below, set while leading; it is held only
	// to read or swap them, never across I/O or planning.
	mu    sync.Mutex
	acks  *ackTracker
	views *views

	policies *policyWatch // the share policies, watched while Run runs
	history  *history     // recent series and reports, for operators

	stats struct {
		badMessages, badDocs, badPolicies, badInstances, deposed, elections, repairs, shadowRepairs atomic.Uint64
	}
}

// New returns a Coordinator for cfg.
func New(cfg Config) (*Coordinator, error) {
	switch {
	case cfg.Etcd == nil:
		return nil, errors.New("coordinator: Config.Etcd is required")
	case cfg.Name == "":
		return nil, errors.New("coordinator: Config.Name is required")
	case cfg.Rules == nil:
		return nil, errors.New("coordinator: Config.Rules is required")
	case cfg.NewSource == nil:
		return nil, errors.New("coordinator: Config.NewSource is required")
	}
	if _, err := planner.New(cfg.Planner); err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	cfg.Planner = cfg.Planner.WithDefaults()
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 2
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LimiterClient == nil {
		cfg.LimiterClient = &http.Client{Timeout: DefaultLimiterTimeout}
	}
	c := &Coordinator{cfg: cfg, log: cfg.Logger.With("coordinator", cfg.Name), now: cfg.Now}
	c.policies = newPolicyWatch(c)
	c.history = newHistory(cfg.Planner.Interval)
	return c, nil
}

// Leader reports whether this coordinator leads now.
func (c *Coordinator) Leader() bool { return c.leader.Load() }

// Run campaigns and leads until ctx is done; it returns nil then. Losing
// leadership (session expired, a fenced write refused) sends it back to
// campaigning.
func (c *Coordinator) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { c.policies.run(ctx) })
	bo := backoff.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	for ctx.Err() == nil {
		err := c.term(ctx)
		if ctx.Err() != nil {
			return nil
		}
		c.log.Warn("leadership ended; campaigning again", "err", err)
		bo.Wait(ctx)
	}
	return nil
}

var errDeposed = errors.New("coordinator: deposed: a fenced write was refused")

// candidate is what a coordinator publishes when it campaigns.
type candidate struct {
	Name     string `json:"name"`
	AdminURL string `json:"admin_url,omitempty"`
}

// LeaderInfo returns the current leader's name and admin URL, read from
// the election in etcd; empty strings when there is none.
func (c *Coordinator) LeaderInfo(ctx context.Context) (name, adminURL string, err error) {
	resp, err := c.cfg.Etcd.Get(ctx, c.cfg.Layout.Election(), clientv3.WithFirstCreate()...)
	if err != nil {
		return "", "", fmt.Errorf("coordinator: leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", "", nil
	}
	var cand candidate
	if err := json.Unmarshal(resp.Kvs[0].Value, &cand); err != nil {
		return string(resp.Kvs[0].Value), "", nil // a coordinator of an older version
	}
	return cand.Name, cand.AdminURL, nil
}

// term campaigns once and leads until leadership ends.
func (c *Coordinator) term(ctx context.Context) error {
	session, err := concurrency.NewSession(c.cfg.Etcd, concurrency.WithTTL(c.cfg.SessionTTL), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("coordinator: etcd session: %w", err)
	}
	defer session.Close()
	election := concurrency.NewElection(session, c.cfg.Layout.Election())
	value, err := json.Marshal(candidate{Name: c.cfg.Name, AdminURL: c.cfg.AdminURL})
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	if err := election.Campaign(ctx, string(value)); err != nil {
		return fmt.Errorf("coordinator: campaign: %w", err)
	}
	c.stats.elections.Add(1)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-session.Done():
			cancel()
		case <-lctx.Done():
		}
	}()
	c.log.Info("leading", "key", election.Key(), "rev", election.Rev())
	fence := clientv3.Compare(clientv3.CreateRevision(election.Key()), "=", election.Rev())
	err = c.lead(lctx, fence)
	c.leader.Store(false)
	rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
	defer rcancel()
	if rerr := election.Resign(rctx); rerr != nil && ctx.Err() == nil {
		c.log.Warn("resign", "err", rerr)
	}
	if errors.Is(err, errDeposed) {
		c.stats.deposed.Add(1)
	}
	if err == nil {
		err = errors.New("coordinator: etcd session ended")
	}
	return err
}

// lead runs the leader's loop until ctx is done or a write is refused. The
// loop is the planner's only user: it ingests the reports the consumer
// hands over, answers the views, and plans and writes on every tick and
// acknowledgement.
func (c *Coordinator) lead(ctx context.Context, fence clientv3.Cmp) error {
	p, err := planner.New(c.cfg.Planner)
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	p.SetRules(c.cfg.Rules())
	c.policies.wait(ctx, time.Second)
	c.applyPolicies(p)
	acks := newAckTracker(c.cfg.Planner.TTL + c.cfg.Planner.Skew)
	own := ownDocs{}
	c.history.reset()
	if err := c.load(ctx, p, acks, own); err != nil {
		return err
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v := &views{ask: make(chan func(*planner.Planner)), done: make(chan struct{})}
	c.mu.Lock()
	c.acks, c.views = acks, v
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.acks, c.views = nil, nil
		c.mu.Unlock()
		close(v.done)
	}()
	c.leader.Store(true)

	reports := make(chan received, reportQueue)
	acked := make(chan struct{}, 1)
	wg.Go(func() { c.consume(ctx, reports) })
	wg.Go(func() { c.watchInstances(ctx, acks, acked) })
	quotas := newQuotaWatch()
	wg.Go(func() { c.watchQuotas(ctx, quotas) })
	var mends <-chan struct{} // nil, never ready, without Shadows
	if c.cfg.Shadows != nil {
		mends = c.cfg.Shadows.Mends()
	}

	interval := c.cfg.Planner.Interval
	delays := newReportDelays(interval)
	// armed is the grace the timer was set for: the tick it fires applies
	// that one, so that it closes the interval it waited for.
	armed := delays.grace(c.now())
	timer := time.NewTimer(untilTick(c.now(), interval, armed))
	defer timer.Stop()
	// Acknowledgements free quota, and so do readings between intervals
	// (planner.Rereads): a round grows into it at once rather than at the
	// next tick, at most every 20 ms. grow fires that round.
	grow := time.NewTimer(time.Hour)
	grow.Stop()
	defer grow.Stop()
	growing := false
	var lastGrow time.Time
	growSoon := func() {
		if !growing {
			growing = true
			grow.Reset(max(0, 20*time.Millisecond-c.now().Sub(lastGrow)))
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-reports:
			c.ingest(p, delays, r)
			if p.Rereads() {
				growSoon()
			}
		case f := <-v.ask:
			f(p)
		case <-timer.C:
			grace := armed
			armed = delays.grace(c.now())
			timer.Reset(untilTick(c.now(), interval, armed))
			// Reports already received count in the intervals this tick
			// closes.
			for drained := false; !drained; {
				select {
				case r := <-reports:
					c.ingest(p, delays, r)
				default:
					drained = true
				}
			}
			p.SetReportGrace(grace)
			if err := c.tick(ctx, p, acks, own, fence); err != nil {
				return err
			}
			if err := c.repair(ctx, p, own, quotas, fence); err != nil {
				return err
			}
			// Also retries the shadow writes a failure left.
			if err := c.mendShadows(ctx, fence); err != nil {
				return err
			}
			c.history.record(p, c.now())
		case <-quotas.changed:
			if err := c.repair(ctx, p, own, quotas, fence); err != nil {
				return err
			}
		case <-mends:
			if err := c.mendShadows(ctx, fence); err != nil {
				return err
			}
		case <-c.policies.changed:
			c.applyPolicies(p)
		case <-acked:
			growSoon()
		case <-grow.C:
			growing = false
			lastGrow = c.now()
			if err := c.round(ctx, p, acks, own, fence); err != nil {
				return err
			}
		}
	}
}

// tick is the planning step of every interval: rules refreshed, policies
// applied to new rules, intervals closed, shares rebalanced and written, leases
// renewed.
func (c *Coordinator) tick(ctx context.Context, p *planner.Planner, acks *ackTracker, own ownDocs, fence clientv3.Cmp) error {
	p.SetRules(c.cfg.Rules())
	c.applyPolicies(p)
	now := c.now()
	p.Tick(now)
	// The leases are written even when a write of the grants failed: a
	// failure may be one request's, and a lease not renewed takes the DC
	// to its static shares.
	if _, err := c.grants(ctx, p, acks, own, fence); err != nil {
		return err
	}
	return c.writeLeases(ctx, p, own, fence, p.Leases(now, c.heardSince(now), c.cfg.Name))
}

// heardSince is when a DC must have been heard from last for its lease to
// be renewed at now: three intervals before.
func (c *Coordinator) heardSince(now time.Time) time.Time {
	return now.Add(-3 * c.cfg.Planner.Interval)
}

// writeLeases writes leases the planner handed out (Leases, WitnessLeases)
// in one transaction and reports them written.
func (c *Coordinator) writeLeases(ctx context.Context, p *planner.Planner, own ownDocs, fence clientv3.Cmp, leases []planner.Lease) error {
	if len(leases) == 0 {
		return nil
	}
	ops := make([]clientv3.Op, len(leases))
	docs := make([][]byte, len(leases))
	for i, l := range leases {
		b, err := proto.Marshal(l.Doc)
		if err != nil {
			return fmt.Errorf("coordinator: marshal lease: %w", err)
		}
		ops[i], docs[i] = clientv3.OpPut(c.cfg.Layout.Lease(l.Doc.GetDc()), string(b)), b
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := c.cfg.Etcd.Txn(wctx).If(fence).Then(ops...).Commit()
	switch {
	case err != nil:
		for _, l := range leases {
			delete(own, c.cfg.Layout.Lease(l.Doc.GetDc())) // unknown now: see grants
		}
		return c.softError("renew leases", err)
	case !resp.Succeeded:
		return errDeposed
	}
	for i, l := range leases {
		p.LeaseWritten(l, resp.Header.Revision)
		own[c.cfg.Layout.Lease(l.Doc.GetDc())] = owned{doc: docs[i], rev: resp.Header.Revision}
	}
	return nil
}

// untilTick returns the time to the next planning tick: grace into each
// interval, when the reports of the interval that just ended are in
// (reportDelays).
func untilTick(now time.Time, interval, grace time.Duration) time.Duration {
	ms := now.UnixMilli()
	iv := interval.Milliseconds()
	next := (ms/iv)*iv + grace.Milliseconds()
	if next <= ms {
		next += iv
	}
	return time.Duration(next-ms) * time.Millisecond
}

// round is the planning step between ticks, when acknowledgements or
// readings free quota: the grants written, then the leases of the DCs
// whose pruned writes a write of theirs would release sooner than the
// clock skew (planner.WitnessLeases): a reading taken at its revision or
// later was surely taken after the release. When a write of the grants
// failed (softError), the leases wait for the next tick: in an outage a
// round then blocks for one write's timeout, not two.
func (c *Coordinator) round(ctx context.Context, p *planner.Planner, acks *ackTracker, own ownDocs, fence clientv3.Cmp) error {
	if written, err := c.grants(ctx, p, acks, own, fence); err != nil || !written {
		return err
	}
	now := c.now()
	return c.writeLeases(ctx, p, own, fence, p.WitnessLeases(now, c.heardSince(now), c.cfg.Name))
}

// grants applies the acknowledgements and writes the grants the planner
// asks for. written reports whether every grant was written: it is false
// with a nil error when etcd failed a write (softError logged it).
func (c *Coordinator) grants(ctx context.Context, p *planner.Planner, acks *ackTracker, own ownDocs, fence clientv3.Cmp) (written bool, err error) {
	now := c.now()
	for _, dc := range p.DCs() {
		p.SetAck(dc, acks.ack(dc, now), now)
	}
	ws := p.Plan(now)
	defer p.Settle()
	for len(ws) > 0 {
		var ops []clientv3.Op
		var docs [][]byte
		size, n := 0, 0
		for n < len(ws) && len(ops) < maxTxnOps {
			b, err := proto.Marshal(ws[n].Doc)
			if err != nil {
				return false, fmt.Errorf("coordinator: marshal: %w", err)
			}
			if len(ops) > 0 && size+len(b) > maxTxnBytes {
				break
			}
			size += len(b)
			ops = append(ops, clientv3.OpPut(c.cfg.Layout.Assignment(ws[n].DC, ws[n].Domain, ws[n].RuleID), string(b)))
			docs = append(docs, b)
			n++
		}
		batch := ws[:n]
		ws = ws[n:]
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := c.cfg.Etcd.Txn(wctx).If(fence).Then(ops...).Commit()
		cancel()
		switch {
		case err != nil:
			p.Written(batch, 0, false)
			p.Written(ws, 0, false)
			// The batch may or may not be in etcd: the leader no longer
			// knows its own documents there, and repair leaves them to
			// the planner, which rewrites them.
			for _, w := range batch {
				delete(own, c.cfg.Layout.Assignment(w.DC, w.Domain, w.RuleID))
			}
			return false, c.softError("write assignments", err)
		case !resp.Succeeded:
			p.Written(batch, 0, false)
			p.Written(ws, 0, false)
			return false, errDeposed
		}
		p.Written(batch, resp.Header.Revision, true)
		for i, w := range batch {
			own[c.cfg.Layout.Assignment(w.DC, w.Domain, w.RuleID)] = owned{doc: docs[i], rev: resp.Header.Revision}
			c.history.wrote(w.DC, resp.Header.Revision, now)
		}
	}
	return true, nil
}

// softError logs an etcd error that does not end leadership; the next round
// retries. It returns nil so that the caller goes on.
func (c *Coordinator) softError(what string, err error) error {
	c.log.Warn("etcd", "op", what, "err", err)
	return nil
}

// received is a decoded report and when it was received.
type received struct {
	r  *weirv1.UsageReport
	at time.Time
}

// consume fetches and decodes the usage reports and hands them to the
// leader's loop over reports, until ctx is done. It never touches the
// planner, so it never waits on the loop's etcd writes unless reports is
// full.
func (c *Coordinator) consume(ctx context.Context, reports chan<- received) {
	var src Source
	bo := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for ctx.Err() == nil {
		if src == nil {
			var err error
			if src, err = c.cfg.NewSource(ctx); err != nil {
				c.log.Warn("usage consumer", "err", err)
				bo.Wait(ctx)
				continue
			}
		}
		m, err := src.Fetch(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("fetch usage report", "err", err)
				bo.Wait(ctx)
			}
			continue
		}
		bo.Reset()
		if r := c.decode(m.Value); r != nil {
			select {
			case reports <- received{r, c.now()}:
			case <-ctx.Done():
				continue // not handed over: left uncommitted
			}
		}
		if err := src.Commit(ctx, m); err != nil && ctx.Err() == nil {
			c.log.Warn("commit usage report", "err", err)
		}
	}
	if src != nil {
		src.Close()
	}
}

// decode returns the report in value, or nil, logged and counted, when
// value is not one.
func (c *Coordinator) decode(value []byte) *weirv1.UsageReport {
	if len(value) > MaxReportBytes {
		c.stats.badMessages.Add(1)
		c.log.Warn("usage report skipped", "reason", "oversized", "bytes", len(value))
		return nil
	}
	var r weirv1.UsageReport
	if err := proto.Unmarshal(value, &r); err != nil {
		c.stats.badMessages.Add(1)
		c.log.Warn("usage report skipped", "reason", "undecodable", "err", err)
		return nil
	}
	return &r
}

// ingest gives one received report to the planner; a refused one is
// logged, counted and skipped.
func (c *Coordinator) ingest(p *planner.Planner, delays *reportDelays, in received) {
	if err := p.Ingest(in.r, in.at); err != nil {
		c.stats.badMessages.Add(1)
		c.log.Warn("usage report skipped", "dc", in.r.GetDc(), "instance", in.r.GetInstance(), "err", err)
		return
	}
	if in.r.GetReadingsOnly() {
		// Readings between intervals: the tick waits for no such report,
		// and they carry no counts.
		c.history.seen(in.r, in.at)
		return
	}
	delays.observe(in.r.GetIntervalStartMs()+in.r.GetIntervalMs(), in.at)
	c.history.observe(in.r, in.at)
}

// ackTracker computes each DC's acknowledgement from its instances' records:
// the least revision applied by a live instance, or by one lost too
// recently for its shares to have run out.
type ackTracker struct {
	mu     sync.Mutex
	grace  time.Duration
	live   map[string]instance // by key
	ghosts map[string]instance
}

type instance struct {
	dc      string
	name    string // the instance's name, from its key
	applied int64
	httpURL string // the base URL of its HTTP API; empty if unknown
	gone    time.Time
}

func newAckTracker(grace time.Duration) *ackTracker {
	return &ackTracker{grace: grace, live: map[string]instance{}, ghosts: map[string]instance{}}
}

func (a *ackTracker) set(key string, in instance) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.live[key] = in
	delete(a.ghosts, key)
}

func (a *ackTracker) remove(key string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if in, ok := a.live[key]; ok {
		in.gone = now
		a.ghosts[key] = in
		delete(a.live, key)
	}
}

// replace sets the live instances to those listed, the others becoming
// ghosts.
func (a *ackTracker) replace(live map[string]instance, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, in := range a.live {
		if _, ok := live[k]; !ok {
			in.gone = now
			a.ghosts[k] = in
		}
	}
	a.live = live
}

// ack returns the revision every known instance of dc — live, or gone
// within the grace — has applied. With none known it returns 0: a DC
// whose limiters are all unreachable (cut off, their registrations
// expired) has acknowledged nothing, and what it was last sent, or any
// earlier share not yet released, must still count as held. (Taking "no
// instance" as "every instance has applied everything" let the others grow
// into a partitioned DC's quota while it still enforced its old share.)
func (a *ackTracker) ack(dc string, now time.Time) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	ack, known := int64(math.MaxInt64), false
	for _, in := range a.live {
		if in.dc == dc {
			ack, known = min(ack, in.applied), true
		}
	}
	for k, in := range a.ghosts {
		if now.Sub(in.gone) > a.grace {
			delete(a.ghosts, k)
		} else if in.dc == dc {
			ack, known = min(ack, in.applied), true
		}
	}
	if !known {
		return 0
	}
	return ack
}

// urls returns the base URLs of the HTTP APIs the live instances of dc
// advertise.
func (a *ackTracker) urls(dc string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, in := range a.live {
		if in.dc == dc && in.httpURL != "" {
			out = append(out, in.httpURL)
		}
	}
	slices.Sort(out)
	return out
}

// counts returns the live instances per DC.
func (a *ackTracker) counts() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for _, in := range a.live {
		out[in.dc]++
	}
	return out
}
