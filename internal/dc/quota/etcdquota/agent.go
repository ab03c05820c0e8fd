package etcdquota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/dc/quota"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/etcd/listwatch"
	"github.com/weirhq/weir/internal/platform/backoff"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// ErrRunning is returned by Run when the Agent is already running or has
// run: an Agent runs once.
var ErrRunning = errors.New("etcdquota: agent already ran")

// MaxInstanceLen bounds Config.Instance, in bytes.
const MaxInstanceLen = 128

// Config configures an Agent. Client, Table and Instance are required; the
// zero values of the others are their defaults.
type Config struct {
	// Client talks to etcd. Required; the Agent does not close it.
	Client *clientv3.Client
	// Table receives the DC's documents; the Agent works for its DC.
	// Required.
	Table *quota.Table
	// Instance names this limiter process within its DC: 1 to
	// MaxInstanceLen bytes, no '/'. A restarted process should take a new
	// name. Required.
	Instance string
	// Layout names the keys. The zero Layout uses etcdlayout.DefaultPrefix.
	Layout etcdlayout.Layout
	// LeaseTTL is the TTL of the etcd lease the instance record lives
	// under, rounded up to whole seconds. Default 5s.
	LeaseTTL time.Duration
	// CountInterval is how often the DC's live instances are counted.
	// Default 1s.
	CountInterval time.Duration
	// RequestTimeout bounds each etcd request other than the watch.
	// Default 5s.
	RequestTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before a retry: it doubles
	// from MinBackoff up to MaxBackoff, drawn from its upper half.
	// Defaults 100ms and 5s.
	MinBackoff, MaxBackoff time.Duration
	// StopTimeout bounds the revocation of the lease when Run returns.
	// Default 2s.
	StopTimeout time.Duration
	// PageSize is how many documents one request of a listing reads.
	// Default 1000.
	PageSize int64
	// StateFile, when set, is where the Agent keeps the DC's assignments it
	// last applied (a weirv1.QuotaState), so that a restart while etcd is
	// unreachable enforces no more than before: New restores the file into
	// the Table (quota.Table.Restore: every rule it lists at min(static,
	// saved) until the first listing), and each listing and change is saved
	// there before it is acknowledged. A file that cannot be read is
	// logged and ignored (static shares, as without one); when a save
	// fails the file is removed, so that no restart restores a state older
	// than the acknowledgement. One file per limiter process; its
	// directory must exist.
	StateFile string
	// Now gives the record's started_ms. Default time.Now.
	Now func() time.Time
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	switch {
	case c.Client == nil:
		return errors.New("etcdquota: Config.Client is required")
	case c.Table == nil:
		return errors.New("etcdquota: Config.Table is required")
	case c.Instance == "" || len(c.Instance) > MaxInstanceLen || strings.Contains(c.Instance, "/"):
		return fmt.Errorf("etcdquota: Config.Instance %.200q: want 1 to %d bytes without '/'", c.Instance, MaxInstanceLen)
	case c.LeaseTTL < 0, c.CountInterval < 0, c.RequestTimeout < 0, c.MinBackoff < 0, c.MaxBackoff < 0, c.StopTimeout < 0:
		return errors.New("etcdquota: negative duration in Config")
	case c.MinBackoff > 0 && c.MaxBackoff > 0 && c.MinBackoff > c.MaxBackoff:
		return fmt.Errorf("etcdquota: Config.MinBackoff %v above MaxBackoff %v", c.MinBackoff, c.MaxBackoff)
	case c.PageSize < 0:
		return fmt.Errorf("etcdquota: negative Config.PageSize %d", c.PageSize)
	}
	return nil
}

// Agent keeps a quota.Table in step with etcd and the instance registered
// (see the package documentation). Create it with New and start it with
// Run; Live and Stats are safe for concurrent use at any time.
type Agent struct {
	cfg     Config
	cli     *clientv3.Client
	table   *quota.Table
	log     *slog.Logger
	dc      string
	started time.Time

	ran      atomic.Bool
	endpoint atomic.Pointer[HTTPEndpoint]
	ack      chan struct{} // capacity 1: an acknowledgement to write
	// ackable is what the record may acknowledge: the Table's Applied
	// once the state it is part of has been saved (Config.StateFile).
	ackable atomic.Pointer[record]
	state   *stateFile // nil without Config.StateFile
	saveErr bool       // the last save failed (logged once per run of failures); the loop's goroutine only
	live    atomic.Int64
	st      counters
	loop    *listwatch.Loop // lists and watches the DC's documents into a docs

	// afterList, if set (by tests), is called after each listing, before
	// the watch starts.
	afterList func(rev int64)
}

type counters struct {
	registered                          atomic.Bool
	registrations, registerErrors, lost atomic.Uint64
	acks, ackErrors, badKeys            atomic.Uint64
	saves, saveErrors                   atomic.Uint64
	restored                            atomic.Int64
	countErrors                         atomic.Uint64
	ackRevision                         atomic.Int64
}

// New returns an Agent; Run starts it.
func New(cfg Config) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.LeaseTTL, 5*time.Second)
	def(&cfg.CountInterval, time.Second)
	def(&cfg.RequestTimeout, 5*time.Second)
	def(&cfg.MinBackoff, 100*time.Millisecond)
	def(&cfg.MaxBackoff, 5*time.Second)
	def(&cfg.StopTimeout, 2*time.Second)
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.MinBackoff)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Agent{
		cfg:     cfg,
		cli:     cfg.Client,
		table:   cfg.Table,
		dc:      cfg.Table.DC(),
		log:     cfg.Logger.With("dc", cfg.Table.DC(), "instance", cfg.Instance),
		started: cfg.Now(),
		ack:     make(chan struct{}, 1),
	}
	a.live.Store(1)
	a.ackable.Store(&record{})
	a.st.restored.Store(-1)
	if cfg.StateFile != "" {
		a.state = &stateFile{path: cfg.StateFile, dc: a.dc}
		a.restore()
	}
	loop, err := listwatch.New(listwatch.Config{
		Client:         cfg.Client,
		Prefix:         cfg.Layout.DCQuotas(a.dc),
		Handler:        &docs{a: a},
		PageSize:       cfg.PageSize,
		RequestTimeout: cfg.RequestTimeout,
		MinBackoff:     cfg.MinBackoff,
		MaxBackoff:     cfg.MaxBackoff,
		Logger:         a.log,
	})
	if err != nil {
		return nil, fmt.Errorf("etcdquota: %w", err)
	}
	a.loop = loop
	return a, nil
}

// HTTPEndpoint is where an instance serves its HTTP API.
type HTTPEndpoint struct {
	// Scheme is "https" when the API serves TLS, else "http".
	Scheme string
	// Addr is the host:port others reach the API at.
	Addr string
}

// SetHTTPEndpoint sets where the instance's HTTP API is, advertised in its
// record from the next write on, so that the coordinator can ask the DC
// about a key. Call it before Run for the first record to carry it.
func (a *Agent) SetHTTPEndpoint(e HTTPEndpoint) { a.endpoint.Store(&e) }

func (a *Agent) advertised() HTTPEndpoint {
	if p := a.endpoint.Load(); p != nil {
		return *p
	}
	return HTTPEndpoint{}
}

// Live returns the number of live limiter instances of the DC, at least 1.
func (a *Agent) Live() int { return int(max(1, a.live.Load())) }

// Stats counts what an Agent did since it was created.
type Stats struct {
	// Registered tells whether the instance record is under a live lease,
	// as far as the Agent knows.
	Registered bool
	// Registrations counts the leases granted with the record written;
	// RegisterErrors the failed attempts; LeasesLost the leases lost while
	// running.
	Registrations, RegisterErrors, LeasesLost uint64
	// Lists counts the listings applied (the first and every re-list);
	// ListErrors the failed ones; Compactions the watches ended by a
	// compaction; Watches the watches started; WatchErrors the watches
	// ended otherwise while running.
	Lists, ListErrors, Compactions, Watches, WatchErrors uint64
	// Acks counts the acknowledgements written; AckErrors the failed
	// writes; AckRevision is the applied revision last written.
	Acks, AckErrors uint64
	AckRevision     int64
	// BadKeys counts keys under the DC's prefix that name neither a rule's
	// assignment nor the lease (skipped).
	BadKeys uint64
	// Restored is how many rules' assignments New restored from
	// Config.StateFile; -1 when no state was read; StateSaves and
	// StateSaveErrors count the saves of the file.
	Restored                    int
	StateSaves, StateSaveErrors uint64
	// CountErrors counts failed counts of the live instances; Live is what
	// Live returns.
	CountErrors uint64
	Live        int
}

// Stats returns the Agent's counters.
func (a *Agent) Stats() Stats {
	lw := a.loop.Stats()
	return Stats{
		Registered:      a.st.registered.Load(),
		Registrations:   a.st.registrations.Load(),
		RegisterErrors:  a.st.registerErrors.Load(),
		LeasesLost:      a.st.lost.Load(),
		Lists:           lw.Lists,
		ListErrors:      lw.ListErrors,
		Compactions:     lw.Compactions,
		Watches:         lw.Watches,
		WatchErrors:     lw.WatchErrors,
		Acks:            a.st.acks.Load(),
		AckErrors:       a.st.ackErrors.Load(),
		AckRevision:     a.st.ackRevision.Load(),
		BadKeys:         a.st.badKeys.Load(),
		Restored:        int(a.st.restored.Load()),
		StateSaves:      a.st.saves.Load(),
		StateSaveErrors: a.st.saveErrors.Load(),
		CountErrors:     a.st.countErrors.Load(),
		Live:            a.Live(),
	}
}

// Run registers the instance, then keeps the Table in step with etcd and
// the acknowledgement and instance count up to date, retrying every error,
// until ctx ends. It then stops its goroutines, revokes the instance's
// lease (within Config.StopTimeout) and returns nil. It returns ErrRunning
// when called a second time.
func (a *Agent) Run(ctx context.Context) error {
	if !a.ran.CompareAndSwap(false, true) {
		return ErrRunning
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	registered := make(chan struct{})
	wg.Go(func() { a.register(ctx, registered) })
	select {
	case <-registered:
	case <-ctx.Done():
		return nil
	}
	wg.Go(func() { a.count(ctx) })
	return a.loop.Run(ctx)
}

// notify asks for the acknowledgement to be written, without waiting.
func (a *Agent) notify() {
	select {
	case a.ack <- struct{}{}:
	default:
	}
}

// record is what the instance record says.
type record struct {
	epoch    uint64
	revision int64
}

// registration is an etcd lease held by the instance.
type registration struct {
	id     clientv3.LeaseID
	ka     <-chan *clientv3.LeaseKeepAliveResponse
	cancel context.CancelFunc // stops the keep-alive
}

// register keeps the instance registered and its record up to date until
// ctx ends, then revokes the lease. It closes registered after the first
// registration. It is the only writer of the record, so at most one write
// is in flight, and each writes the latest acknowledgement.
func (a *Agent) register(ctx context.Context, registered chan<- struct{}) {
	var (
		reg     *registration
		written record
		retry   <-chan time.Time // a failed write to retry
		first   = true
		bo      = backoff.Backoff{Min: a.cfg.MinBackoff, Max: a.cfg.MaxBackoff}
		ackBo   = backoff.Backoff{Min: a.cfg.MinBackoff, Max: a.cfg.MaxBackoff}
	)
	defer func() {
		if reg != nil {
			a.revoke(ctx, reg)
		}
		a.st.registered.Store(false)
	}()
	for {
		if reg == nil {
			r, rec, err := a.grant(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				a.st.registerErrors.Add(1)
				a.log.Warn("etcdquota: registration failed; retrying", "err", err)
				if !backoff.Sleep(ctx, bo.Next()) {
					return
				}
				continue
			}
			bo.Reset()
			reg, written = r, rec
			a.st.registrations.Add(1)
			a.st.registered.Store(true)
			a.st.ackRevision.Store(rec.revision)
			a.log.Debug("etcdquota: registered", "lease", reg.id, "applied_revision", rec.revision)
			if first {
				close(registered)
				first = false
			}
		}
		select {
		case <-ctx.Done():
			return
		case _, ok := <-reg.ka:
			if ok {
				continue
			}
			if ctx.Err() != nil {
				return
			}
			a.st.lost.Add(1)
			a.st.registered.Store(false)
			a.log.Warn("etcdquota: instance lease lost; registering again", "lease", reg.id)
			reg.cancel()
			reg = nil
		case <-a.ack:
		case <-retry:
			retry = nil
		}
		if reg == nil || retry != nil {
			continue
		}
		rec := *a.ackable.Load()
		if rec == written {
			continue
		}
		if err := a.put(ctx, reg.id, rec); err != nil {
			if ctx.Err() != nil {
				return
			}
			a.st.ackErrors.Add(1)
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				a.st.lost.Add(1)
				a.st.registered.Store(false)
				a.log.Warn("etcdquota: instance lease gone; registering again", "lease", reg.id)
				reg.cancel()
				reg = nil
				continue
			}
			a.log.Warn("etcdquota: acknowledgement not written; retrying", "err", err)
			retry = time.After(ackBo.Next())
			continue
		}
		ackBo.Reset()
		written = rec
		a.st.acks.Add(1)
		a.st.ackRevision.Store(rec.revision)
	}
}

// grant takes a new lease, writes the record under it with the latest
// acknowledgement and starts keeping the lease alive.
func (a *Agent) grant(ctx context.Context) (*registration, record, error) {
	rctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	ttl := int64((a.cfg.LeaseTTL + time.Second - 1) / time.Second)
	lease, err := a.cli.Grant(rctx, ttl)
	if err != nil {
		return nil, record{}, fmt.Errorf("grant a lease of %ds: %w", ttl, err)
	}
	rec := *a.ackable.Load()
	if err := a.put(rctx, lease.ID, rec); err != nil {
		a.revoke(ctx, &registration{id: lease.ID, cancel: func() {}})
		return nil, record{}, err
	}
	kctx, kcancel := context.WithCancel(ctx)
	ka, err := a.cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		kcancel()
		a.revoke(ctx, &registration{id: lease.ID, cancel: func() {}})
		return nil, record{}, fmt.Errorf("keep lease %x alive: %w", lease.ID, err)
	}
	return &registration{id: lease.ID, ka: ka, cancel: kcancel}, rec, nil
}

// put writes the instance record under lease.
func (a *Agent) put(ctx context.Context, lease clientv3.LeaseID, rec record) error {
	http := a.advertised()
	v, err := proto.Marshal(&weirv1.InstanceRecord{
		Dc:              a.dc,
		Instance:        a.cfg.Instance,
		AppliedRevision: rec.revision,
		Epoch:           rec.epoch,
		StartedMs:       a.started.UnixMilli(),
		HttpAddr:        http.Addr,
		HttpScheme:      http.Scheme,
	})
	if err != nil {
		return fmt.Errorf("encode instance record: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	key := a.cfg.Layout.Instance(a.dc, a.cfg.Instance)
	if _, err := a.cli.Put(rctx, key, string(v), clientv3.WithLease(lease)); err != nil {
		return fmt.Errorf("write instance record %s: %w", key, err)
	}
	return nil
}

// revoke stops keeping reg alive and revokes it, within StopTimeout even
// when ctx has ended.
func (a *Agent) revoke(ctx context.Context, reg *registration) {
	reg.cancel()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.StopTimeout)
	defer cancel()
	if _, err := a.cli.Revoke(rctx, reg.id); err != nil {
		a.log.Warn("etcdquota: revoke instance lease; the record stays until it expires", "lease", reg.id, "err", err)
	}
}

// count counts the DC's live instances every CountInterval until ctx ends.
func (a *Agent) count(ctx context.Context) {
	t := time.NewTicker(a.cfg.CountInterval)
	defer t.Stop()
	prefix := a.cfg.Layout.Instances() + a.dc + "/"
	for {
		rctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
		resp, err := a.cli.Get(rctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		switch {
		case err == nil:
			a.live.Store(resp.Count)
		case ctx.Err() == nil:
			a.st.countErrors.Add(1)
			a.log.Debug("etcdquota: count instances", "prefix", prefix, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// docs hands what the listing and the watch read of the DC's documents to
// the Table; the Agent's loop calls it from one goroutine.
type docs struct {
	a       *Agent
	changes []quota.Change // reused from one call to the next
}

var _ listwatch.Handler = (*docs)(nil)

// Replace puts a listing of the DC's documents in force.
func (d *docs) Replace(rev int64, kvs []listwatch.Event) {
	d.a.table.Reset(rev, d.decode(kvs))
	clear(d.changes) // drop the decoded documents until the next call
	d.a.applied()
	if d.a.afterList != nil {
		d.a.afterList(rev)
	}
}

// Apply puts the watch's changes in force.
func (d *docs) Apply(rev int64, events []listwatch.Event) {
	d.a.table.Apply(rev, d.decode(events))
	clear(d.changes)
	d.a.applied()
}

func (d *docs) decode(events []listwatch.Event) []quota.Change {
	d.changes = d.changes[:0]
	for _, ev := range events {
		if c, ok := d.a.change(ev); ok {
			d.changes = append(d.changes, c)
		}
	}
	return d.changes
}

// change decodes one key-value of the DC's prefix; false when the key
// names neither a rule's assignment nor the DC's lease (counted, logged).
func (a *Agent) change(kv listwatch.Event) (quota.Change, bool) {
	k, err := a.cfg.Layout.ParseQuota(string(kv.Key))
	if err == nil && k.DC != a.dc {
		err = fmt.Errorf("%q is not of dc %q", kv.Key, a.dc)
	}
	if err != nil {
		a.st.badKeys.Add(1)
		a.log.Warn("etcdquota: skipping unexpected key", "revision", kv.Revision, "err", err)
		return quota.Change{}, false
	}
	deleted := kv.Delete
	c := quota.Change{Domain: k.Domain, RuleID: k.RuleID, Revision: kv.Revision, Delete: deleted}
	switch {
	case deleted:
	case len(kv.Value) > quota.MaxDocumentSize:
		c.Err = fmt.Errorf("document of %d bytes, more than %d", len(kv.Value), quota.MaxDocumentSize)
	case k.Lease:
		var m weirv1.AssignmentLease
		if err := proto.Unmarshal(kv.Value, &m); err != nil {
			c.Err = fmt.Errorf("decode lease: %w", err)
			break
		}
		c.Lease = &quota.Lease{
			DC:         m.GetDc(),
			Epoch:      m.GetEpoch(),
			ValidUntil: time.UnixMilli(m.GetValidUntilMs()),
			TTL:        millis(m.GetTtlMs()),
		}
	default:
		var m weirv1.RuleAssignment
		if err := proto.Unmarshal(kv.Value, &m); err != nil {
			c.Err = fmt.Errorf("decode assignment: %w", err)
			break
		}
		as := assignment(&m)
		c.Assignment = &as
	}
	return c, true
}

// millis converts milliseconds to a Duration, saturating.
func millis(ms int64) time.Duration {
	const limit = math.MaxInt64 / int64(time.Millisecond)
	return time.Duration(max(-limit, min(ms, limit))) * time.Millisecond
}
