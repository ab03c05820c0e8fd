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
	"github.com/weirhq/weir/pkg/logthrottle"
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

	// skipLines rate-limits the log of usage reports and instance records
	// skipped: whoever can produce to the topic, or write a DC's instance
	// records (its limiters), can send any number.
	skipLines *logthrottle.Throttle

	policies *policyWatch // the share policies, watched while Run runs
	history  *history     // recent series and reports, for operators

	stats struct {
		badMessages, badDocs, badPolicies, badInstances, deposed, elections, sessionsLost, repairs, shadowRepairs atomic.Uint64
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
	c.skipLines = logthrottle.New(skipLogEvery, cfg.Now)
	c.policies = newPolicyWatch(c)
	c.history = newHistory(cfg.Planner.Interval)
	return c, nil
}

// Leader reports whether this coordinator leads now.
func (c *Coordinator) Leader() bool { return c.leader.Load() }

// Run campaigns and leads until ctx is done; it returns nil then. Losing
// leadership (session expired, a fenced write refused) sends it back to
// campaigning, and so does a standby's session ending while it waits its
// turn: every term runs under its session, so a coordinator always either
// has a live candidacy in the election or is about to make one.
func (c *Coordinator) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { c.policies.run(ctx) })
	bo := backoff.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	down := sessionFailures{now: c.now}
	for ctx.Err() == nil {
		start := c.now()
		session, err := c.newSession(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			down.failed(err, c.log)
			bo.Wait(ctx)
			continue
		}
		down.recovered(c.log)
		err = c.term(ctx, session)
		if ctx.Err() != nil {
			return nil
		}
		var lost *sessionLostError
		if errors.As(err, &lost) {
			c.stats.sessionsLost.Add(1)
			c.log.Warn("etcd session lost; campaigning again with a new session",
				"lease", lost.lease, "leading", lost.leading, "reason", lost.reason)
		} else {
			c.log.Warn("leadership ended; campaigning again", "err", err)
		}
		// A term that lasted is not a failure in a row: the next wait
		// starts short again.
		if c.now().Sub(start) > bo.Max {
			bo.Reset()
		}
		bo.Wait(ctx)
	}
	return nil
}

// sessionFailures rate-limits the log of failures to create an etcd
// session (etcd unreachable): the first of a run of failures is logged,
// then at most one line every sessionLogEvery with the count so far, and
// the recovery once. It is used by Run's goroutine only.
type sessionFailures struct {
	n     int
	lines *logthrottle.Throttle // nil before the run's first failure
	now   func() time.Time
}

// sessionLogEvery is the least time between two log lines of failures to
// create a session.
const sessionLogEvery = 30 * time.Second

func (f *sessionFailures) failed(err error, log *slog.Logger) {
	f.n++
	if f.lines == nil {
		f.lines = logthrottle.New(sessionLogEvery, f.now)
	}
	if held, ok := f.lines.Allow(); ok {
		log.Warn("cannot create an etcd session; not campaigning until one is created", "failures", f.n, logthrottle.Held(held), "err", err)
	}
}

func (f *sessionFailures) recovered(log *slog.Logger) {
	if f.n > 0 {
		log.Info("etcd session created after failures", "failures", f.n)
	}
	f.n, f.lines = 0, nil
}

// sessionLostError is returned by term when its session ended under it
// (the lease expired, was revoked, or its keepalives failed).
type sessionLostError struct {
	lease   string // the lease's ID in hex, as in the election key
	leading bool
	reason  string
}

func (e *sessionLostError) Error() string {
	return fmt.Sprintf("coordinator: etcd session lost (lease %s): %s", e.lease, e.reason)
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

// term campaigns once in session and leads until leadership ends; it
// closes session. The campaign and the leadership both run under the
// session's context: the campaign waits for the keys ahead of ours to go
// and watches nothing of our own key, so without it a standby whose lease
// ended (keepalives starved by a loaded etcd, the lease revoked) went on
// waiting with no key in the election until the leader left.
func (c *Coordinator) term(ctx context.Context, session *concurrency.Session) error {
	defer session.Close()
	sctx := session.Ctx() // done when the session ends or ctx is
	value, err := json.Marshal(candidate{Name: c.cfg.Name, AdminURL: c.cfg.AdminURL})
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	election, err := c.campaign(sctx, session, string(value))
	if err != nil {
		if lost := c.sessionLost(ctx, session, false); lost != nil {
			return lost
		}
		return fmt.Errorf("coordinator: campaign: %w", err)
	}
	c.stats.elections.Add(1)
	c.log.Info("leading", "key", election.Key(), "rev", election.Rev())
	fence := clientv3.Compare(clientv3.CreateRevision(election.Key()), "=", election.Rev())
	err = c.lead(sctx, fence)
	c.leader.Store(false)
	rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
	defer rcancel()
	if rerr := election.Resign(rctx); rerr != nil && ctx.Err() == nil {
		c.log.Warn("resign", "err", rerr)
	}
	if errors.Is(err, errDeposed) {
		c.stats.deposed.Add(1)
		return err
	}
	if lost := c.sessionLost(ctx, session, true); lost != nil {
		return lost
	}
	if err == nil {
		err = errors.New("coordinator: etcd session ended")
	}
	return err
}

// campaign does what concurrency.Election.Campaign does — puts our key
// under the session's lease, then waits until every key created before it
// is deleted — and returns the election we lead. It differs in one thing:
// interrupted (ctx done: the session ended or Run is stopping), Campaign
// resigns under the client's own context, which waits for as long as etcd
// is unreachable, so a standby could not stop, nor notice its lost
// session, until etcd came back. Here the key is left to the session,
// whose Close revokes its lease.
func (c *Coordinator) campaign(ctx context.Context, session *concurrency.Session, value string) (*concurrency.Election, error) {
	prefix := c.cfg.Layout.Election() + "/" // as concurrency.NewElection spells it
	key := fmt.Sprintf("%s%x", prefix, int64(session.Lease()))
	resp, err := c.cfg.Etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value, clientv3.WithLease(session.Lease()))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return nil, err
	}
	rev := resp.Header.Revision
	if !resp.Succeeded { // a fresh lease: cannot happen, but take the key as it is
		rev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
	}
	// Wait for the keys ahead of ours, the youngest first.
	for {
		ahead, err := c.cfg.Etcd.Get(ctx, prefix, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...)
		if err != nil {
			return nil, err
		}
		if len(ahead.Kvs) == 0 {
			break
		}
		if err := waitDelete(ctx, c.cfg.Etcd, string(ahead.Kvs[0].Key), ahead.Header.Revision); err != nil {
			return nil, err
		}
	}
	return concurrency.ResumeElection(session, c.cfg.Layout.Election(), key, rev), nil
}

// waitDelete waits until key is deleted at or after rev.
func waitDelete(ctx context.Context, cli *clientv3.Client, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range cli.Watch(wctx, key, clientv3.WithRev(rev), clientv3.WithFilterPut()) {
		if err := wr.Err(); err != nil {
			return err
		}
		if len(wr.Events) > 0 {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("watch ended before the key was deleted")
}

// newSession grants the lease of a new session, waiting for etcd at most
// the session's TTL: the client waits for a connection as long as it is
// let, and a coordinator that cannot reach etcd should say so and back
// off rather than wait silently.
func (c *Coordinator) newSession(ctx context.Context) (*concurrency.Session, error) {
	ttl := time.Duration(c.cfg.SessionTTL) * time.Second
	gctx, cancel := context.WithTimeout(ctx, ttl)
	resp, err := c.cfg.Etcd.Grant(gctx, int64(c.cfg.SessionTTL))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("coordinator: grant session lease: %w", err)
	}
	session, err := concurrency.NewSession(c.cfg.Etcd, concurrency.WithLease(resp.ID), concurrency.WithTTL(c.cfg.SessionTTL), concurrency.WithContext(ctx))
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
		c.cfg.Etcd.Revoke(rctx, resp.ID) // best effort: it expires anyway
		cancel()
		return nil, fmt.Errorf("coordinator: keep session lease %x alive: %w", int64(resp.ID), err)
	}
	return session, nil
}

// sessionLost returns the error of a session that ended while ctx is not
// done, saying why as far as etcd can tell; nil while the session lives.
func (c *Coordinator) sessionLost(ctx context.Context, session *concurrency.Session, leading bool) *sessionLostError {
	select {
	case <-session.Done():
	default:
		return nil
	}
	if ctx.Err() != nil {
		return nil
	}
	lost := &sessionLostError{lease: fmt.Sprintf("%x", int64(session.Lease())), leading: leading}
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := c.cfg.Etcd.TimeToLive(qctx, session.Lease())
	switch {
	case err != nil:
		lost.reason = "keepalives failed; etcd unreachable: " + err.Error()
	case resp.TTL <= 0:
		lost.reason = "lease expired or revoked in etcd"
	default:
		lost.reason = "keepalives not answered within the TTL (lease still alive in etcd, revoked now)"
	}
	return lost
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

// skipLogEvery is the least time between two log lines of skipped usage
// reports or instance records; each counts those skipped since the last.
const skipLogEvery = 10 * time.Second

// skipped counts a usage report skipped, and logs it with attrs unless
// such a line was logged less than skipLogEvery ago.
func (c *Coordinator) skipped(attrs ...any) {
	c.stats.badMessages.Add(1)
	if held, ok := c.skipLines.Allow(); ok {
		c.log.Warn("usage report skipped", append(attrs, logthrottle.Held(held))...)
	}
}

// decode returns the report in value, or nil, logged and counted, when
// value is not one.
func (c *Coordinator) decode(value []byte) *weirv1.UsageReport {
	if len(value) > MaxReportBytes {
		c.skipped("reason", "oversized", "bytes", len(value))
		return nil
	}
	var r weirv1.UsageReport
	if err := proto.Unmarshal(value, &r); err != nil {
		c.skipped("reason", "undecodable", "err", err)
		return nil
	}
	return &r
}

// ingest gives one received report to the planner; a refused one is
// logged, counted and skipped.
func (c *Coordinator) ingest(p *planner.Planner, delays *reportDelays, in received) {
	if err := p.Ingest(in.r, in.at); err != nil {
		c.skipped("dc", in.r.GetDc(), "instance", in.r.GetInstance(), "err", err)
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
