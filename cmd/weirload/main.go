// Command weirload is a lean load generator for the limiter's gRPC APIs:
// weir.v1 Check, or Envoy's ShouldRateLimit (--api envoy), or the gRPC
// health service (--call health) as a floor. It runs a bounded number of workers for a bounded time, closed-loop
// (each sends its next call when the last is answered) or paced (--rate:
// calls fall due at an even rate, a free worker sends each, and latency
// counts from when it was due), and reports decisions per second, latency
// percentiles and, given the PIDs of the limiter and of redis-server, their
// CPU time per decision read from /proc.
//
//	weirload --target 127.0.0.1:9090 --concurrency 50 --duration 10s --keys 1
//
// It only ever connects to the target it is given; use it on loopback or on
// hosts you own.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/weirhq/weir/internal/platform/cputime"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

type config struct {
	target      string
	concurrency int
	conns       int
	duration    time.Duration
	warmup      time.Duration
	rate        float64
	keys        int
	batch       int
	domain      string
	attrs       string
	keyAttr     string
	pid         int
	storePID    int
	name        string
	jsonOut     bool
	call        string
	api         string
	samplesOut  string
	storeAddr   string
	metricsURL  string
}

// Result is what a run measured.
type Result struct {
	Name       string  `json:"name"`
	Decisions  int64   `json:"decisions"`
	Calls      int64   `json:"calls"`
	Errors     int64   `json:"errors"`
	Allowed    int64   `json:"allowed"`
	Seconds    float64 `json:"seconds"`
	PerSecond  float64 `json:"decisions_per_second"`
	P50Micros  float64 `json:"p50_us"`
	P99Micros  float64 `json:"p99_us"`
	P999Micros float64 `json:"p999_us"`
	MaxMicros  float64 `json:"max_us"`
	// With --rate: how late the client's pacer woke after calls were due
	// (its timer and scheduling, not the limiter's). Latency counts from
	// when each call was due, so this lag is part of it.
	PacerLagP99Micros float64 `json:"pacer_lag_p99_us,omitempty"`
	CPUMicros         float64 `json:"limiter_cpu_us_per_decision,omitempty"`
	CallCPUMicro      float64 `json:"limiter_cpu_us_per_call,omitempty"`
	// With --store-pid: redis-server's CPU per decision.
	StoreCPUMicros float64 `json:"store_cpu_us_per_decision,omitempty"`
	// With --store-addr: Redis commands per decision (INFO commandstats,
	// the commands scripts call included, INFO itself not).
	StoreCommands float64 `json:"store_commands_per_decision,omitempty"`
	// With --metrics: the share of the limiter's rule decisions that came
	// from a failure mode (weir_decisions_total, source failure_*), and
	// how many.
	FailureShare     float64 `json:"failure_share"`
	FailureDecisions int64   `json:"failure_decisions"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "weirload:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var c config
	fs := flag.NewFlagSet("weirload", flag.ContinueOnError)
	fs.StringVar(&c.target, "target", "127.0.0.1:9090", "limiter gRPC address")
	fs.IntVar(&c.concurrency, "concurrency", 50, "workers (1 to 10,000)")
	fs.IntVar(&c.conns, "conns", 2, "gRPC connections shared by the workers")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured time (at most 10m)")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "unmeasured time before it")
	fs.Float64Var(&c.rate, "rate", 0, "calls per second, due at an even rate and sent by whichever worker is free (at most --concurrency in flight); 0 runs closed-loop as fast as answers come")
	fs.IntVar(&c.keys, "keys", 1, "distinct key values to cycle through")
	fs.IntVar(&c.batch, "batch", 1, "items per Check call")
	fs.StringVar(&c.domain, "domain", "", "rule domain")
	fs.StringVar(&c.attrs, "attrs", "", "fixed attributes, k=v,k=v")
	fs.StringVar(&c.keyAttr, "key-attr", "user_id", "attribute that carries the varying key")
	fs.IntVar(&c.pid, "pid", 0, "limiter PID, to report its CPU per decision")
	fs.IntVar(&c.storePID, "store-pid", 0, "redis-server PID, to report its CPU per decision too (with the limiter's, how busy the core they share is)")
	fs.StringVar(&c.name, "name", "run", "name of this run in the report")
	fs.StringVar(&c.call, "call", "check", "what to call: check (weir.v1 Check) or health (grpc.health.v1 Check: the gRPC path with no decision, a floor)")
	fs.StringVar(&c.api, "api", "weir", "API of --call check: weir (weir.v1 Check; --batch items per call) or envoy (envoy.service.ratelimit.v3 ShouldRateLimit; --batch descriptors per call, each the --attrs entries then the key's)")
	fs.StringVar(&c.storeAddr, "store-addr", "", "redis-server host:port, to report Redis commands per decision from INFO commandstats")
	fs.StringVar(&c.metricsURL, "metrics", "", "the limiter's /metrics URL, to report the share of decisions from failure modes")
	fs.BoolVar(&c.jsonOut, "json", false, "print the result as JSON")
	fs.StringVar(&c.samplesOut, "samples", "", "write every measured call to this file, one line each: when it was due (µs after the first) and its latency (µs), to see whether slow calls come together")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case c.concurrency < 1 || c.concurrency > 10_000:
		return fmt.Errorf("--concurrency %d outside [1, 10000]", c.concurrency)
	case c.duration <= 0 || c.duration > 10*time.Minute:
		return fmt.Errorf("--duration %v outside (0, 10m]", c.duration)
	case c.batch < 1 || c.batch > 256 || c.keys < 1 || c.conns < 1:
		return errors.New("--batch must be 1 to 256; --keys and --conns at least 1")
	case c.call != "check" && c.call != "health":
		return fmt.Errorf("--call %q, want check or health", c.call)
	case c.api != "weir" && c.api != "envoy":
		return fmt.Errorf("--api %q, want weir or envoy", c.api)
	case c.call == "health" && c.batch != 1:
		return errors.New("--call health takes no --batch")
	}
	fixed := map[string]string{}
	if c.attrs != "" {
		for _, kv := range strings.Split(c.attrs, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("--attrs: %q is not k=v", kv)
			}
			fixed[k] = v
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := load(ctx, c, fixed)
	if err != nil {
		return err
	}
	// With --json the JSON goes to stdout and the line for people to stderr.
	human := os.Stdout
	if c.jsonOut {
		human = os.Stderr
		if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
			return err
		}
	}
	fmt.Fprintf(human, "%-28s %10.0f decisions/s  p50 %7.0fµs  p99 %7.0fµs  p99.9 %7.0fµs  max %7.0fµs  errors %d", res.Name, res.PerSecond, res.P50Micros, res.P99Micros, res.P999Micros, res.MaxMicros, res.Errors)
	if res.PacerLagP99Micros > 0 {
		fmt.Fprintf(human, "  client pacer lag p99 %.0fµs", res.PacerLagP99Micros)
	}
	if res.CPUMicros > 0 {
		fmt.Fprintf(human, "  limiter CPU %.1fµs/decision (%.1fµs/call)", res.CPUMicros, res.CallCPUMicro)
	}
	if res.StoreCPUMicros > 0 {
		fmt.Fprintf(human, "  redis CPU %.1fµs/decision", res.StoreCPUMicros)
	}
	if c.storeAddr != "" {
		fmt.Fprintf(human, "  redis %.2f commands/decision", res.StoreCommands)
	}
	if c.metricsURL != "" {
		fmt.Fprintf(human, "  failure modes %.4f%% (%d)", 100*res.FailureShare, res.FailureDecisions)
	}
	fmt.Fprintln(human)
	return nil
}

func load(ctx context.Context, c config, fixed map[string]string) (Result, error) {
	conns := make([]weirv1.LimiterClient, c.conns)
	envoys := make([]rlsv3.RateLimitServiceClient, c.conns)
	health := make([]healthpb.HealthClient, c.conns)
	for i := range conns {
		cc, err := grpc.NewClient(c.target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return Result{}, fmt.Errorf("connect %s: %w", c.target, err)
		}
		defer cc.Close()
		conns[i], health[i] = weirv1.NewLimiterClient(cc), healthpb.NewHealthClient(cc)
		envoys[i] = rlsv3.NewRateLimitServiceClient(cc)
	}
	var (
		measuring atomic.Bool
		calls     atomic.Int64
		errs      atomic.Int64
		allowed   atomic.Int64
		mu        sync.Mutex
		samples   []time.Duration
		perCall   []callSample
		firstErr  atomic.Value
	)
	// Cancelled by a timer rather than given a deadline: a deadline would
	// travel with every call, and the calls in flight at the end would
	// come back as DeadlineExceeded errors a moment before the run ends.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopTimer := time.AfterFunc(c.warmup+c.duration, cancel)
	defer stopTimer.Stop()
	var pace *pacer
	if c.rate > 0 {
		interval := time.Duration(float64(time.Second) / c.rate)
		if interval <= 0 {
			return Result{}, fmt.Errorf("--rate %g: above one call per nanosecond", c.rate)
		}
		now := time.Now()
		pace = newPacer(now, interval, now.Add(c.warmup))
	}
	var keyCounter atomic.Int64
	var wg sync.WaitGroup
	for w := range c.concurrency {
		wg.Go(func() {
			client, hc, ec := conns[w%len(conns)], health[w%len(health)], envoys[w%len(envoys)]
			envoyReq, envoyKeys := envoyRequest(c, fixed)
			items := make([]*weirv1.CheckItem, c.batch)
			for i := range items {
				attrs := make(map[string]string, len(fixed)+1)
				for k, v := range fixed {
					attrs[k] = v
				}
				items[i] = &weirv1.CheckItem{Attributes: attrs, Hits: 1}
			}
			req := &weirv1.CheckRequest{Domain: c.domain, Items: items}
			healthReq := &healthpb.HealthCheckRequest{}
			local := make([]time.Duration, 0, 1<<14)
			var localCalls []callSample
			for runCtx.Err() == nil {
				start := time.Now()
				if pace != nil {
					// Paced: latency counts from when the call was due, so
					// a slow answer is not hidden by sending later.
					k, ok := <-pace.due
					if !ok {
						break
					}
					start = pace.scheduled(k)
				}
				var n int64
				var err error
				switch {
				case c.call == "health":
					// Counted as one allowed decision, for the same report.
					_, err = hc.Check(runCtx, healthReq)
					n = 1
				case c.api == "envoy":
					for _, e := range envoyKeys {
						e.Value = "k" + strconv.FormatInt(keyCounter.Add(1)%int64(c.keys), 10)
					}
					var resp *rlsv3.RateLimitResponse
					if resp, err = ec.ShouldRateLimit(runCtx, envoyReq); err == nil {
						for _, st := range resp.GetStatuses() {
							if st.GetCode() == rlsv3.RateLimitResponse_OK {
								n++
							}
						}
					}
				default:
					for _, it := range items {
						it.Attributes[c.keyAttr] = "k" + strconv.FormatInt(keyCounter.Add(1)%int64(c.keys), 10)
					}
					var resp *weirv1.CheckResponse
					if resp, err = client.Check(runCtx, req); err == nil {
						for _, ir := range resp.GetItems() {
							if ir.GetAllowed() {
								n++
							}
						}
					}
				}
				if runCtx.Err() != nil {
					break
				}
				if !measuring.Load() {
					continue
				}
				lat := time.Since(start)
				calls.Add(1)
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				allowed.Add(n)
				local = append(local, lat)
				if c.samplesOut != "" {
					localCalls = append(localCalls, callSample{start, lat})
				}
			}
			mu.Lock()
			samples = append(samples, local...)
			perCall = append(perCall, localCalls...)
			mu.Unlock()
		})
	}
	var (
		lags     []time.Duration
		paceErr  error
		paceDone = make(chan struct{})
	)
	if pace != nil {
		go func() {
			defer close(paceDone)
			lags, paceErr = pace.run(runCtx)
			if paceErr != nil {
				cancel() // no more calls will fall due: end the run now
			}
		}()
	} else {
		close(paceDone)
	}
	select {
	case <-time.After(c.warmup):
	case <-runCtx.Done():
	}
	before, err := readCounts(ctx, c)
	if err != nil {
		return Result{}, err
	}
	cpu0, store0 := procCPU(c.pid), procCPU(c.storePID)
	t0 := time.Now()
	measuring.Store(true)
	<-runCtx.Done()
	elapsed := time.Since(t0)
	cpu1, store1 := procCPU(c.pid), procCPU(c.storePID)
	wg.Wait() // the calls in flight end (cancelled) before the counts are read
	after, err := readCounts(ctx, c)
	if err != nil {
		return Result{}, err
	}
	<-paceDone
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	if paceErr != nil {
		return Result{}, paceErr
	}
	if c.samplesOut != "" {
		if err := writeSamples(c.samplesOut, perCall); err != nil {
			return Result{}, err
		}
	}
	slices.Sort(samples)
	slices.Sort(lags)
	pctOf := func(xs []time.Duration, p float64) float64 {
		if len(xs) == 0 {
			return 0
		}
		return float64(xs[min(len(xs)-1, int(p*float64(len(xs))))].Microseconds())
	}
	pct := func(p float64) float64 { return pctOf(samples, p) }
	n := calls.Load() - errs.Load()
	r := Result{
		Name: c.name, Calls: calls.Load(), Decisions: n * int64(c.batch), Errors: errs.Load(), Allowed: allowed.Load(),
		Seconds: elapsed.Seconds(), P50Micros: pct(0.50), P99Micros: pct(0.99), P999Micros: pct(0.999), MaxMicros: pct(1),
		PacerLagP99Micros: pctOf(lags, 0.99),
	}
	r.PerSecond = float64(r.Decisions) / r.Seconds
	if r.Decisions > 0 {
		r.StoreCommands = float64(after.commands-before.commands) / float64(r.Decisions)
	}
	r.FailureDecisions = after.failed - before.failed
	if after.all > before.all {
		r.FailureShare = float64(r.FailureDecisions) / float64(after.all-before.all)
	}
	if c.storePID > 0 && store1 > store0 && r.Decisions > 0 {
		r.StoreCPUMicros = (store1 - store0).Seconds() * 1e6 / float64(r.Decisions)
	}
	if c.pid > 0 && cpu1 > cpu0 && r.Decisions > 0 {
		r.CPUMicros = (cpu1 - cpu0).Seconds() * 1e6 / float64(r.Decisions)
		r.CallCPUMicro = (cpu1 - cpu0).Seconds() * 1e6 / float64(n)
	}
	if e, ok := firstErr.Load().(string); ok {
		fmt.Fprintln(os.Stderr, "weirload: first error:", e)
	}
	return r, nil
}

// envoyRequest returns a ShouldRateLimit request of c.batch descriptors,
// each the fixed entries (sorted by key, for a stable request) then the key
// attribute's, and the key entries for the caller to set before each call.
func envoyRequest(c config, fixed map[string]string) (*rlsv3.RateLimitRequest, []*rlcommonv3.RateLimitDescriptor_Entry) {
	keys := make([]string, 0, len(fixed))
	for k := range fixed {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	req := &rlsv3.RateLimitRequest{Domain: c.domain}
	entries := make([]*rlcommonv3.RateLimitDescriptor_Entry, c.batch)
	for i := range entries {
		d := &rlcommonv3.RateLimitDescriptor{}
		for _, k := range keys {
			d.Entries = append(d.Entries, &rlcommonv3.RateLimitDescriptor_Entry{Key: k, Value: fixed[k]})
		}
		entries[i] = &rlcommonv3.RateLimitDescriptor_Entry{Key: c.keyAttr}
		d.Entries = append(d.Entries, entries[i])
		req.Descriptors = append(req.Descriptors, d)
	}
	return req, entries
}

// callSample is one measured call: when it was due (or sent, unpaced)
// and how long its answer took from then.
type callSample struct {
	start time.Time
	lat   time.Duration
}

// writeSamples writes calls, ordered by start, as "start_us latency_us"
// lines, start counted from the first call's.
func writeSamples(path string, calls []callSample) error {
	slices.SortFunc(calls, func(a, b callSample) int { return a.start.Compare(b.start) })
	var b strings.Builder
	for _, s := range calls {
		fmt.Fprintf(&b, "%d %d\n", s.start.Sub(calls[0].start).Microseconds(), s.lat.Microseconds())
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write samples: %w", err)
	}
	return nil
}

// procCPU returns the user+system CPU time of pid so far; 0 when pid is
// 0 or its time cannot be read.
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	d, err := cputime.Process(pid)
	if err != nil {
		return 0
	}
	return d
}
