// Package sim runs a whole multi-DC Weir in one process and plays traffic
// at it: real limiters (one per DC, each with its own redis-server when one
// is installed), an embedded etcd, an in-process Kafka-protocol broker and
// two coordinators — the same components as production, on loopback. It
// injects faults on schedule (kill the leader coordinator, stop the
// broker, pause a DC's Redis, cut a DC off, lose, duplicate or delay
// reports) and records what every DC offered and admitted each second and
// the shares in force, for package simreport to judge.
//
// Each DC reaches etcd through its own netsim proxy, which is how a DC is
// cut off; a cut-off DC's usage reports are dropped on their way to the
// coordinator, as if its link to Kafka were down too.
package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/weirhq/weir/internal/kafka/usagetopic"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/control/coordinator"
	"github.com/weirhq/weir/internal/control/planner"
	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/etcd/etcdclient"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/etcd/rulestore"
	"github.com/weirhq/weir/internal/platform/backoff"
	"github.com/weirhq/weir/internal/platform/embedetcd"
	"github.com/weirhq/weir/internal/platform/embedkafka"
	"github.com/weirhq/weir/internal/platform/redisproc"
	"github.com/weirhq/weir/internal/sim/netsim"
	"github.com/weirhq/weir/internal/sim/simreport"
	"github.com/weirhq/weir/internal/sim/wan"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Flow is traffic from one DC: requests with the given attributes, aimed
// at one rule, at Rate(t) requests per second.
type Flow struct {
	DC, Rule   string
	Attributes map[string]string
	Rate       func(t time.Duration) float64
	// Poisson draws requests as a Poisson process; otherwise they are
	// evenly paced.
	Poisson bool
}

// Fault is a failure injected at At, for For (0: until the run ends, or
// once for kill-leader).
type Fault struct {
	At       time.Duration
	Kind     string // kill-leader, stop-broker, start-broker, pause-redis, partition, lose-reports, duplicate-reports, delay-reports
	DC       string
	For      time.Duration
	Fraction float64
	By       time.Duration
}

// Config is one run.
type Config struct {
	Name     string
	DCs      []string
	Rules    rule.Set
	Duration time.Duration
	// Interval is the reporting and planning interval; TTL the
	// assignments' (default 5 intervals).
	Interval, TTL time.Duration
	Flows         []Flow
	Faults        []Fault
	// Memory keeps every DC's state in memory even when redis-server is
	// installed.
	Memory bool
	// Live, if set, receives a table per second.
	Live io.Writer
	// Logger for the components. Default: discard.
	Logger *slog.Logger
	// Seed makes the Poisson draws and the report faults repeatable.
	Seed uint64
	// StoreTimeout is the limiters' Redis call timeout (default
	// DefaultStoreTimeout).
	StoreTimeout time.Duration
	// WAN, if set, puts every DC behind an emulated WAN (package wan; needs
	// root): each DC's limiter runs as a process in its own network
	// namespace, and reaches etcd and Kafka through the delaying router.
	// Its DCs are Config's. See wan.go.
	WAN *wan.Config
	// Console, if set, serves the first coordinator's admin API and
	// operators' console while the run plays (console.go).
	Console *ConsoleConfig
}

// DefaultStoreTimeout is the simulated limiters' Redis call timeout:
// longer than production's 20 ms because every DC, its Redis and the
// control plane share one machine here, where a CPU-starved Redis would
// otherwise pass for a failed one and put the DC in its failure mode.
const DefaultStoreTimeout = 100 * time.Millisecond

// Run plays the scenario and returns its trace. It stops every component
// before returning, on failure too.
func Run(ctx context.Context, cfg Config) (*simreport.Trace, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 5 * cfg.Interval
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = DefaultStoreTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Live != nil {
		cfg.Live = &lockedWriter{w: cfg.Live}
	}
	for _, f := range cfg.Faults {
		if f.Kind != "pause-redis" {
			continue
		}
		switch {
		case cfg.Memory:
			return nil, fmt.Errorf("sim: the pause-redis fault at %v needs redis-server, and the run keeps state in memory", f.At)
		case redisproc.Binary() == "":
			return nil, fmt.Errorf("sim: the pause-redis fault at %v needs redis-server, which is not installed (Debian: apt-get install redis-server)", f.At)
		}
	}
	w, err := start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	return w.play(ctx)
}

// world is a running simulation.
type world struct {
	cfg    Config
	log    *slog.Logger
	dir    string
	etcd   *embedetcd.Server
	cli    *clientv3.Client
	broker *embedkafka.Broker
	kafka  string
	rules  []rule.Rule
	faults *reportFaults
	wan    *wanWorld // WAN mode only
	// undos are the goroutines that end timed faults; stop waits for them.
	undos sync.WaitGroup

	mu     sync.Mutex
	coords []*coord
	dcs    map[string]*dc
	stops  []func()
}

type dc struct {
	name   string
	proxy  *netsim.Proxy
	redis  *redisproc.Server
	client weirv1.LimiterClient
}

type coord struct {
	c      *coordinator.Coordinator
	cli    *clientv3.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func start(ctx context.Context, cfg Config) (w *world, err error) {
	w = &world{cfg: cfg, log: cfg.Logger, dcs: map[string]*dc{}, faults: newReportFaults(cfg.Seed)}
	started := w // the returns below set w to nil
	defer func() {
		if err != nil {
			started.stop()
		}
	}()
	if w.dir, err = os.MkdirTemp("", "weir-sim-"); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if cfg.WAN != nil {
		if err = w.upWAN(ctx); err != nil {
			return nil, err
		}
	}
	if w.etcd, err = embedetcd.Start(ctx, embedetcd.Config{Dir: filepath.Join(w.dir, "etcd"), ClientAddr: w.listenAddr()}); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if w.cli, err = newClient(w.etcd.Endpoint()); err != nil {
		return nil, err
	}
	if err = w.startBroker(); err != nil {
		return nil, err
	}
	for _, r := range cfg.Rules.Rules {
		r.SetDefaults()
		r.Domain = cfg.Rules.Domain
		w.rules = append(w.rules, r)
	}
	if _, err = rulestore.Put(ctx, w.cli, etcdlayout.Layout{}, cfg.Rules, time.Now()); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	for i := range 2 {
		if err = w.startCoordinator(fmt.Sprintf("coordinator-%d", i+1)); err != nil {
			return nil, err
		}
	}
	if cfg.Console != nil {
		if err = w.startConsole(); err != nil {
			return nil, err
		}
	}
	useRedis := !cfg.Memory && redisproc.Binary() != ""
	if !useRedis && !cfg.Memory && cfg.Live != nil {
		fmt.Fprintln(cfg.Live, "sim: redis-server is not installed: every DC keeps its state in memory")
	}
	for _, name := range cfg.DCs {
		if err = w.startDC(ctx, name, useRedis); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func newClient(endpoint string) (*clientv3.Client, error) {
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{endpoint}})
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return cli, nil
}

func (w *world) startBroker() error {
	addr := w.kafka
	if addr == "" {
		addr = w.listenAddr()
	}
	b, err := embedkafka.Start(embedkafka.Config{Addr: addr, Topics: []string{usagetopic.Name}, DataDir: filepath.Join(w.dir, "kafka")})
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	w.mu.Lock()
	w.broker, w.kafka = b, b.Addr()
	w.mu.Unlock()
	return nil
}

func (w *world) startCoordinator(name string) error {
	cli, err := newClient(w.etcd.Endpoint())
	if err != nil {
		return err
	}
	c, err := coordinator.New(coordinator.Config{
		Etcd: cli, Name: name,
		// The simulated DCs share this machine's clock: the skew tolerated
		// between coordinator and limiters is one planning interval, not
		// the default second that covers real clocks (it delays the quota
		// a DC leaves behind by that much: a twelfth of a 12 s window).
		Planner: planner.Config{DCs: w.cfg.DCs, Interval: w.cfg.Interval, TTL: w.cfg.TTL, Skew: w.cfg.Interval},
		Rules:   func() []rule.Rule { return w.rules },
		NewSource: func(context.Context) (coordinator.Source, error) {
			src, err := usagetopic.NewConsumer(usagetopic.ConsumerConfig{Brokers: []string{w.kafka}})
			if err != nil {
				return nil, err
			}
			return &faultySource{inner: src, f: w.faults}, nil
		},
		SessionTTL: 1, Logger: w.log, // the coordinator names itself in its logs
	})
	if err != nil {
		cli.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	co := &coord{c: c, cli: cli, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(co.done); c.Run(ctx) }()
	w.mu.Lock()
	w.coords = append(w.coords, co)
	w.mu.Unlock()
	return nil
}

func (w *world) startDC(ctx context.Context, name string, useRedis bool) error {
	if w.wan != nil {
		return w.startNode(ctx, name, useRedis)
	}
	d := &dc{name: name}
	var err error
	if d.proxy, err = netsim.Listen(hostPort(w.etcd.Endpoint())); err != nil {
		return err
	}
	redisAddr := ""
	if useRedis {
		rdir := filepath.Join(w.dir, "redis-"+name)
		if err := os.MkdirAll(rdir, 0o755); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		if d.redis, err = redisproc.Start(rdir); err != nil {
			return err
		}
		redisAddr = d.redis.Addr
	}
	w.mu.Lock()
	w.dcs[name] = d
	w.mu.Unlock()
	ready := make(chan string, 1)
	lctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- limiterd.Run(lctx, limiterd.Config{
			DC: name, DCs: w.cfg.DCs, Redis: redisAddr,
			HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0",
			Etcd: []string{"http://" + d.proxy.Addr()}, Kafka: []string{w.kafka}, ReportInterval: w.cfg.Interval,
			SyncTimeout: 5 * time.Second, ShutdownGrace: time.Second, StoreTimeout: w.cfg.StoreTimeout,
			Logger: w.log, Ready: func(_, grpcAddr string) { ready <- grpcAddr },
		})
	}()
	w.mu.Lock()
	w.stops = append(w.stops, func() { cancel(); <-done })
	w.mu.Unlock()
	select {
	case addr := <-ready:
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		w.mu.Lock()
		w.stops = append(w.stops, func() { conn.Close() })
		w.mu.Unlock()
		d.client = weirv1.NewLimiterClient(conn)
		return nil
	case err := <-done:
		return fmt.Errorf("sim: limiter %s: %w", name, err)
	case <-time.After(30 * time.Second):
		return fmt.Errorf("sim: limiter %s did not start", name)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func hostPort(endpoint string) string {
	for _, p := range []string{"http://", "https://"} {
		if len(endpoint) > len(p) && endpoint[:len(p)] == p {
			return endpoint[len(p):]
		}
	}
	return endpoint
}

// stop stops everything, limiters first.
func (w *world) stop() {
	w.undos.Wait()
	w.mu.Lock()
	stops, coords, dcs, broker := w.stops, w.coords, w.dcs, w.broker
	w.stops, w.coords = nil, nil
	w.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	for _, c := range coords {
		c.cancel()
		<-c.done
		c.cli.Close()
	}
	for _, d := range dcs {
		if d.proxy != nil {
			d.proxy.Close()
		}
		if d.redis != nil {
			d.redis.Resume()
			d.redis.Stop()
		}
	}
	if broker != nil {
		broker.Close()
	}
	if w.cli != nil {
		w.cli.Close()
	}
	if w.etcd != nil {
		w.etcd.Close()
	}
	if w.wan != nil {
		w.closeWAN()
	}
	if w.dir != "" {
		os.RemoveAll(w.dir)
	}
}

// play runs the traffic, the faults and the recording for the duration.
func (w *world) play(ctx context.Context) (*simreport.Trace, error) {
	rec := newRecorder(w.cfg, w.rules)
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Duration)
	defer cancel()
	start := time.Now()
	rec.start = start
	var wg sync.WaitGroup
	for i, f := range w.cfg.Flows {
		d := w.dcs[f.DC]
		if d == nil {
			return nil, fmt.Errorf("sim: flow %d: unknown DC %q", i, f.DC)
		}
		rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(i)))
		wg.Go(func() { w.flow(ctx, start, d, f, rng, rec) })
	}
	wg.Go(func() { w.sample(ctx, start, rec) })
	wg.Go(func() { w.live(ctx, start, rec) })
	wg.Go(func() { w.inject(ctx, start) })
	wg.Wait()
	tr := rec.trace(w.cfg, start)
	if w.wan != nil {
		tr.WAN = &simreport.WAN{Links: w.wan.links}
	}
	return tr, nil
}

// flow sends one flow's requests until ctx is done. It is open loop, as
// real clients are: each request goes at its scheduled time whether or
// not the earlier ones have been answered, up to maxInFlight at once, so
// a slow limiter does not lower the demand it sees.
func (w *world) flow(ctx context.Context, start time.Time, d *dc, f Flow, rng *rand.Rand, rec *recorder) {
	attrs := make(map[string]string, len(f.Attributes))
	for k, v := range f.Attributes {
		attrs[k] = v
	}
	var inflight sync.WaitGroup
	defer inflight.Wait()
	slots := make(chan struct{}, maxInFlight)
	next := time.Now()
	for ctx.Err() == nil {
		rate := f.Rate(time.Since(start))
		if rate <= 0 {
			if !backoff.Sleep(ctx, 20*time.Millisecond) {
				return
			}
			next = time.Now()
			continue
		}
		gap := time.Duration(float64(time.Second) / rate)
		if f.Poisson {
			gap = time.Duration(rng.ExpFloat64() * float64(time.Second) / rate)
		}
		next = next.Add(gap)
		if wait := time.Until(next); wait > 0 {
			if !backoff.Sleep(ctx, wait) {
				return
			}
		} else if wait < -time.Second {
			next = time.Now() // fell behind: do not burst to catch up
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		sent := time.Now()
		inflight.Go(func() {
			defer func() { <-slots }()
			cctx, ccancel := context.WithTimeout(ctx, time.Second)
			resp, err := d.client.Check(cctx, &weirv1.CheckRequest{Domain: w.cfg.Rules.Domain, Items: []*weirv1.CheckItem{{Attributes: attrs, Hits: 1}}})
			ccancel()
			if ctx.Err() != nil {
				return
			}
			rec.request(f.Rule, d.name, sent.Sub(start), err == nil && resp.GetAllowed(), resp)
		})
	}
}

// maxInFlight bounds a flow's requests awaiting an answer.
const maxInFlight = 64

// sample records each DC's local limit of every rule every 100 ms.
func (w *world) sample(ctx context.Context, start time.Time, rec *recorder) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		at := time.Since(start)
		for _, r := range w.rules {
			if r.Scope != rule.ScopeGlobal || r.Limit <= 0 {
				continue
			}
			shares := map[string]float64{}
			for _, name := range w.cfg.DCs {
				sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				resp, err := w.dcs[name].client.Status(sctx, &weirv1.StatusRequest{Domain: w.cfg.Rules.Domain, RuleId: r.ID, Key: rec.key(r.ID)})
				cancel()
				if err == nil {
					shares[name] = float64(resp.GetResult().GetLimit()) / float64(r.Limit)
				}
			}
			rec.share(r.ID, at, shares)
		}
	}
}

// live prints a table per second.
func (w *world) live(ctx context.Context, start time.Time, rec *recorder) {
	if w.cfg.Live == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sec := int(time.Since(start)/time.Second) - 1
		for _, r := range w.rules {
			s, shares, ok := rec.second(r.ID, sec)
			if !ok {
				continue
			}
			fmt.Fprintf(w.cfg.Live, "t=%3ds  rule %s (limit %d/%ds)\n", sec+1, r.ID, r.Limit, r.WindowSeconds)
			simreport.FormatLive(w.cfg.Live, s, shares, r.Limit)
		}
	}
}

// inject applies the faults on schedule.
func (w *world) inject(ctx context.Context, start time.Time) {
	faults := append([]Fault(nil), w.cfg.Faults...)
	sort.SliceStable(faults, func(i, j int) bool { return faults[i].At < faults[j].At })
	for _, f := range faults {
		if !backoff.Sleep(ctx, time.Until(start.Add(f.At))) {
			return
		}
		if err := w.apply(ctx, f); err != nil {
			w.log.Warn("fault not applied", "kind", f.Kind, "err", err)
			if w.cfg.Live != nil {
				fmt.Fprintf(w.cfg.Live, "sim: fault %s not applied: %v\n", f.Kind, err)
			}
			continue
		}
		if w.cfg.Live != nil {
			fmt.Fprintf(w.cfg.Live, "sim: t=%v fault %s %s for %v\n", f.At, f.Kind, f.DC, f.For)
		}
	}
}

// after runs undo once d has passed, unless ctx ends first (the world is
// torn down then anyway). stop waits for it.
func (w *world) after(ctx context.Context, d time.Duration, undo func()) {
	if d <= 0 {
		return
	}
	w.undos.Go(func() {
		if backoff.Sleep(ctx, d) {
			undo()
		}
	})
}

func (w *world) apply(ctx context.Context, f Fault) error {
	if w.wan != nil {
		if handled, err := w.applyWAN(ctx, f); handled {
			return err
		}
	}
	switch f.Kind {
	case "kill-leader":
		w.mu.Lock()
		var leader *coord
		rest := w.coords[:0]
		for _, c := range w.coords {
			if leader == nil && c.c.Leader() {
				leader = c
				continue
			}
			rest = append(rest, c)
		}
		w.coords = rest
		w.mu.Unlock()
		if leader == nil {
			return errors.New("no leader")
		}
		// As a killed process: the etcd connection goes first, so the
		// session is neither resigned nor revoked.
		leader.cli.Close()
		leader.cancel()
		<-leader.done
		w.after(ctx, 2*time.Second, func() { _ = w.startCoordinator(fmt.Sprintf("coordinator-r%d", time.Now().UnixNano()%1000)) })
	case "stop-broker":
		w.mu.Lock()
		b := w.broker
		w.broker = nil
		w.mu.Unlock()
		if b == nil {
			return errors.New("broker already stopped")
		}
		b.Close()
		w.after(ctx, f.For, func() { _ = w.startBroker() })
	case "start-broker":
		w.mu.Lock()
		running := w.broker != nil
		w.mu.Unlock()
		if running {
			return errors.New("broker already running")
		}
		return w.startBroker()
	case "pause-redis":
		d := w.dcs[f.DC]
		if d == nil || d.redis == nil {
			return fmt.Errorf("DC %q has no redis-server", f.DC)
		}
		if err := d.redis.Pause(); err != nil {
			return err
		}
		w.after(ctx, f.For, func() { _ = d.redis.Resume() })
	case "partition":
		d := w.dcs[f.DC]
		if d == nil {
			return fmt.Errorf("unknown DC %q", f.DC)
		}
		d.proxy.SetDown(true)
		w.faults.cut(f.DC, true)
		w.after(ctx, f.For, func() { d.proxy.SetDown(false); w.faults.cut(f.DC, false) })
	case "lose-reports", "duplicate-reports", "delay-reports":
		w.faults.set(f.Kind, f.Fraction, f.By)
		w.after(ctx, f.For, func() { w.faults.set(f.Kind, 0, 0) })
	default:
		return fmt.Errorf("unknown fault %q", f.Kind)
	}
	return nil
}

// reportFaults are the report faults in force, applied by faultySource on
// the coordinator's side of Kafka.
type reportFaults struct {
	mu        sync.Mutex
	rng       *rand.Rand
	lose, dup float64
	delay     time.Duration
	cutDCs    map[string]bool
}

func newReportFaults(seed uint64) *reportFaults {
	return &reportFaults{rng: rand.New(rand.NewPCG(seed, 99)), cutDCs: map[string]bool{}}
}

func (r *reportFaults) set(kind string, fraction float64, by time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch kind {
	case "lose-reports":
		r.lose = fraction
	case "duplicate-reports":
		r.dup = fraction
	case "delay-reports":
		r.delay = by
	}
}

func (r *reportFaults) cut(dc string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cutDCs[dc] = on
}

// decide says what happens to a report of DC dc.
func (r *reportFaults) decide(dc string) (drop, dup bool, delay time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cutDCs[dc] || r.rng.Float64() < r.lose, r.rng.Float64() < r.dup, r.delay
}

// faultySource applies the report faults to a coordinator's consumer.
type faultySource struct {
	inner   coordinator.Source
	f       *reportFaults
	pending []usagetopic.Message
}

func (s *faultySource) Fetch(ctx context.Context) (usagetopic.Message, error) {
	for {
		if len(s.pending) > 0 {
			m := s.pending[0]
			s.pending = s.pending[1:]
			return m, nil
		}
		m, err := s.inner.Fetch(ctx)
		if err != nil {
			return m, err
		}
		var r weirv1.UsageReport
		_ = proto.Unmarshal(m.Value, &r)
		drop, dup, delay := s.f.decide(r.GetDc())
		if drop {
			_ = s.inner.Commit(ctx, m)
			continue
		}
		if delay > 0 {
			// Hold it until `delay` after it was sent, at its interval's end.
			sent := time.UnixMilli(r.GetIntervalStartMs() + r.GetIntervalMs())
			if !backoff.Sleep(ctx, time.Until(sent.Add(delay))) {
				return usagetopic.Message{}, ctx.Err()
			}
		}
		if dup {
			s.pending = append(s.pending, m)
		}
		return m, nil
	}
}

func (s *faultySource) Commit(ctx context.Context, m usagetopic.Message) error {
	return s.inner.Commit(ctx, m)
}

func (s *faultySource) Close() error { return s.inner.Close() }
