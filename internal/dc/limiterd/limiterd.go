// Package limiterd runs a regional limiter: it wires the store (Redis or
// memory), the limiter, the rule source, the HTTP and gRPC servers and the
// metrics together, and shuts them down in order. cmd/limiter is a thin
// main around Run.
package limiterd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/weirhq/weir/internal/dc/envoyrls"
	"github.com/weirhq/weir/internal/dc/grpcapi"
	"github.com/weirhq/weir/internal/dc/httpapi"
	"github.com/weirhq/weir/internal/dc/metrics"
	"github.com/weirhq/weir/internal/dc/quota/etcdquota"
	"github.com/weirhq/weir/internal/dc/usage"
	"github.com/weirhq/weir/internal/etcd/etcdclient"
	"github.com/weirhq/weir/internal/platform/backoff"
	"github.com/weirhq/weir/internal/platform/tlsconf"
	"github.com/weirhq/weir/pkg/httplimit"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/store/coalesce"
	"github.com/weirhq/weir/pkg/store/memstore"
	"github.com/weirhq/weir/pkg/store/redisstore"
)

var _ limiter.BoundedDecider = (*coalesce.Coalescer)(nil)

// Config configures a limiter process. Zero values take the documented
// defaults; RulesFile is required.
type Config struct {
	// DC names the datacenter. Default "local".
	DC string
	// Redis is the DC's Redis: host:port, a redis:// (rediss://) URL, or
	// for Redis Cluster several comma-separated host:port, or a URL naming
	// further nodes with addr parameters
	// (rediss://user:pass@node1:6379?addr=node2:6379), which is how a
	// cluster needing TLS or a password is given. Empty keeps state in
	// memory (single-node use).
	Redis string
	// RedisTLS, when any file is given, connects to Redis over TLS (to
	// every node, and to Redis Sentinels), trusting the CA's certificates
	// (else the system's) and presenting the client certificate (mutual
	// TLS). Redis then needs host:port or rediss://, not redis://.
	RedisTLS tlsconf.ClientFiles
	// RedisScriptPerRequest sends each decision in a script call of its
	// own even to one node (redisstore.Config.ScriptPerRequest): for a
	// proxy that routes a script call by its first key.
	RedisScriptPerRequest bool
	// StoreTimeout is the least bound on each store call; the bound adapts
	// to the store's latency above it (limiter.Config.StoreTimeout).
	// Default 20ms.
	StoreTimeout time.Duration
	// StoreTimeoutMax is the most the bound may adapt to. Default 10 ×
	// StoreTimeout.
	StoreTimeoutMax time.Duration
	// StorePause, if set, is the pause a healthy Redis may take of itself
	// that the bound adds (limiter.Config.StorePause). Default (nil): a
	// quarter of 1/hz, read from Redis's nodes at start (redishz.go).
	StorePause *time.Duration
	// MaxInFlight bounds the store requests in flight; AdmitWait is how
	// long a call waits for room before its decisions are shed to their
	// failure modes (limiter.Config). Defaults 4096 and StoreTimeout.
	MaxInFlight int
	AdmitWait   time.Duration
	// RulesFile is the YAML or JSON rule file, or a directory whose
	// *.yaml and *.yml files, at any depth, are each a domain's (Weir rule
	// files or configurations of envoyproxy/ratelimit), re-read when they
	// change; dot entries are passed over, other files skipped with a
	// warning (listRules).
	// Without it the rules come from etcd (Etcd required), as the admin API
	// writes them.
	RulesFile string
	// MergeDomains merges the configurations of envoyproxy/ratelimit in
	// RulesFile that name one domain into that domain, in path order, as
	// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG=true does: a top
	// descriptor in two of them refuses them all, and the domain keeps
	// the rules it had. A Weir rule file still
	// shares its domain with no other file. Default false: a domain
	// repeated across files is refused, its first file in force
	// (fileRules.domains says exactly which). Rules from etcd have
	// nothing to merge: Validate refuses it without RulesFile.
	MergeDomains bool
	// DefaultDomain, if set, is the rule domain of check and status
	// requests that name none (limiter.Config.DefaultDomain). Default "":
	// such a request is the only loaded domain's, and is refused while
	// several are loaded.
	DefaultDomain string
	// EnvoyHeaders names the rate limit headers the Envoy API adds to its
	// answers (envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED):
	// all three names, or none. Validate refuses some without the others,
	// naming the flags missing. Default: none.
	EnvoyHeaders envoyrls.Headers
	// EnvoyShadowMode answers OK on the Envoy API every call that would
	// be OVER_LIMIT, on every domain, with the decisions made and
	// counted as ever (envoyproxy/ratelimit's SHADOW_MODE;
	// envoyrls.Config.ShadowMode); weir_envoy_shadow_overrides_total
	// counts those calls. Default off.
	EnvoyShadowMode bool
	// EnvoyQuotaMode puts every descriptor of a domain loaded from a
	// configuration of envoyproxy/ratelimit in quota_mode (its
	// QUOTA_MODE; envoyrls.Config.QuotaMode). Default off.
	EnvoyQuotaMode bool
	// EnvoyStopIncrementWhenOverLimit gives back, on the Envoy API, what
	// a call's descriptors under their limits took when any descriptor is
	// over (envoyproxy/ratelimit's STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT;
	// envoyrls.Config.StopIncrementWhenOverLimit). Default off.
	EnvoyStopIncrementWhenOverLimit bool
	// EnvoyDynamicMetadata sets the dynamic metadata of the Envoy API's
	// answers on domains of envoyproxy/ratelimit's configuration (its
	// RESPONSE_DYNAMIC_METADATA; envoyrls.Config.DynamicMetadata).
	// Default off.
	EnvoyDynamicMetadata bool
	// RulesPoll is how often the rule file is checked. Default 1s.
	RulesPoll time.Duration
	// HTTPAddr is the HTTP API's listen address. Default 127.0.0.1:8080.
	HTTPAddr string
	// GRPCAddr is the gRPC API's listen address. Default 127.0.0.1:9090.
	GRPCAddr string
	// CacheKeys sizes the hot-key cache (negative disables it). Default 100,000.
	CacheKeys int64
	// MemoryKeys caps the in-memory store (and the failure_mode local
	// store). Default 1,000,000.
	MemoryKeys int
	// DebugAddr, if set, serves Go's pprof profiles (net/http/pprof) on
	// this address. Keep it on loopback.
	DebugAddr string
	// ShutdownGrace is how long in-flight requests get on shutdown.
	// Default 10s.
	ShutdownGrace time.Duration
	// ShutdownDelay is how long the limiter goes on serving once shutdown
	// begins, every health check failing meanwhile (gRPC health
	// NOT_SERVING, /readyz 503, /healthcheck 500), before it stops
	// accepting: time for load balancers and Kubernetes endpoints to take
	// it out of rotation before its ports close. Default 0: it stops
	// accepting at once.
	ShutdownDelay time.Duration
	// TLS, when its files are given, serves both APIs over TLS (mutual
	// TLS with a client CA).
	TLS tlsconf.Files
	// DCs names every DC, for the static shares of global rules (which
	// split a rule's limit among them). Default: DC alone, which enforces
	// global rules whole.
	DCs []string
	// Etcd lists etcd endpoints; with them the limiter watches its DC's
	// assignments, registers itself and acknowledges what it applied.
	Etcd []string
	// EtcdAuth is how the limiter checks etcd and proves itself to it
	// (TLS files, a user); the zero value is plain connections.
	EtcdAuth etcdclient.Auth
	// EtcdPrefix prefixes Weir's etcd keys. Default /weir/.
	EtcdPrefix string
	// SyncTimeout bounds the wait for the first listing of assignments
	// before serving. Default 3s.
	SyncTimeout time.Duration
	// StateDir, with Etcd, is a directory (created if missing) where the
	// limiter keeps the DC's assignments it last applied (quota-{dc}.pb),
	// saved before it acknowledges them, and, without RulesFile, the rules
	// it read from etcd (rules.pb). Restarted while etcd is unreachable,
	// it then enforces each saved assignment at min(static, saved) instead
	// of its static share, and the saved rules instead of none, until it
	// lists again. One directory per process.
	StateDir string
	// Kafka lists brokers; with them the limiter reports usage every
	// ReportInterval (default 1s) to UsageTopic (default weir.usage).
	Kafka          []string
	UsageTopic     string
	ReportInterval time.Duration
	// ReadsBetween is how many times between two reports the limiter reads
	// the long-window entries its DC holds quota of while quiet and
	// reports those readings alone (usage.ReporterConfig.ReadsBetween):
	// 0, usage.DefaultReadsBetween; negative, none — for coordinators
	// that predate such reports, until they are upgraded.
	ReadsBetween int
	// Instance names this process in etcd and in reports. Default
	// {dc}-{host}-{pid}-{random}.
	Instance string
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Proxy configures the reverse-proxy mode; it is off without an
	// upstream.
	Proxy Proxy
	// Ready, if not nil, is called with the bound addresses once both
	// servers listen (tests use it with ":0" addresses).
	Ready func(httpAddr, grpcAddr string)
}

// Proxy is the reverse-proxy mode: a listener whose requests are checked
// (pkg/httplimit) and, when allowed, passed to Upstream; rejected ones are
// answered 429 there.
type Proxy struct {
	// Upstream is the http:// or https:// URL allowed requests go to.
	Upstream string
	// Addr is the proxy's listen address. Default 127.0.0.1:8081.
	Addr string
	// Domain is the rule domain; empty when one is loaded.
	Domain string
	// Headers maps request headers to attributes (httplimit.Config.Headers).
	Headers map[string]string
	// TrustedProxies are the peers whose X-Forwarded-For is believed.
	TrustedProxies []netip.Prefix
	// OnError: what to do with a request that could not be checked.
	OnError httplimit.OnError
}

func (c *Config) setDefaults() {
	if c.DC == "" {
		c.DC = "local"
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = 20 * time.Millisecond
	}
	if c.StoreTimeoutMax == 0 {
		c.StoreTimeoutMax = 10 * c.StoreTimeout
	}
	c.StoreTimeoutMax = max(c.StoreTimeoutMax, c.StoreTimeout)
	if c.RulesPoll == 0 {
		c.RulesPoll = time.Second
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = "127.0.0.1:8080"
	}
	if c.GRPCAddr == "" {
		c.GRPCAddr = "127.0.0.1:9090"
	}
	if c.MemoryKeys == 0 {
		c.MemoryKeys = 1_000_000
	}
	if c.Proxy.Upstream != "" && c.Proxy.Addr == "" {
		c.Proxy.Addr = "127.0.0.1:8081"
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.SyncTimeout == 0 {
		c.SyncTimeout = 3 * time.Second
	}
}

// etcdClient is the configuration of the limiter's etcd client.
func (c Config) etcdClient() etcdclient.Config {
	return etcdclient.Config{Endpoints: c.Etcd, Auth: c.EtcdAuth, Logger: c.Logger}
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	var errs []error
	if c.RulesFile == "" {
		if len(c.Etcd) == 0 {
			errs = append(errs, errors.New("rules are required: a rules file (--rules) or etcd (--etcd)"))
		}
	}
	if c.StoreTimeout < 0 || c.StoreTimeoutMax < 0 || c.AdmitWait < 0 || c.RulesPoll < 0 || c.ShutdownGrace < 0 || c.ShutdownDelay < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if err := checkDCs(c); err != nil {
		errs = append(errs, err)
	}
	if len(c.Etcd) > 0 {
		if err := c.etcdClient().Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.MergeDomains && c.RulesFile == "" {
		errs = append(errs, errors.New("--merge-domains merges the files of a rules directory (--rules); rules from etcd have none to merge"))
	}
	if c.StateDir != "" && len(c.Etcd) == 0 {
		errs = append(errs, errors.New("a state directory (--state-dir) keeps what the limiter reads from etcd: it needs --etcd"))
	}
	if c.ReadsBetween > usage.MaxReadsBetween {
		errs = append(errs, fmt.Errorf("reads between reports %d: at most %d", c.ReadsBetween, usage.MaxReadsBetween))
	}
	if c.StorePause != nil && *c.StorePause < 0 {
		errs = append(errs, fmt.Errorf("store pause (--store-pause) %v must not be negative", *c.StorePause))
	}
	if c.MemoryKeys < 0 {
		errs = append(errs, fmt.Errorf("memory keys %d must not be negative", c.MemoryKeys))
	}
	if err := checkEnvoyHeaders(c.EnvoyHeaders); err != nil {
		errs = append(errs, err)
	}
	if c.Proxy.Upstream != "" {
		if _, err := upstreamURL(c.Proxy.Upstream); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("limiterd: invalid config: %w", err)
	}
	return nil
}

// checkEnvoyHeaders refuses Envoy response headers named in part: the
// Envoy API adds all three headers or none, and one without a name would
// reach Envoy as a response_headers_to_add entry with an empty key. The
// error names the flags (and so the WEIR_ variables) set and missing.
func checkEnvoyHeaders(h envoyrls.Headers) error {
	var set, missing []string
	for _, f := range []struct{ flag, name string }{
		{"--envoy-header-limit", h.Limit},
		{"--envoy-header-remaining", h.Remaining},
		{"--envoy-header-reset", h.Reset},
	} {
		if f.name == "" {
			missing = append(missing, f.flag)
		} else {
			set = append(set, f.flag)
		}
	}
	if len(set) == 0 || len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("the Envoy API adds its response headers all three or none: %s set, %s missing (flags, or WEIR_ENVOY_HEADER_* variables)",
		strings.Join(set, " and "), strings.Join(missing, " and "))
}

// Run runs the limiter until ctx is done, then shuts down gracefully:
// health checks fail from then on, the APIs go on serving for
// ShutdownDelay, then servers stop accepting and in-flight requests
// finish (up to ShutdownGrace).
func Run(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := cfg.Logger.With("dc", cfg.DC)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	met, err := metrics.NewLimiter(reg)
	if err != nil {
		return fmt.Errorf("limiterd: metrics: %w", err)
	}

	st, err := openStore(cfg)
	if err != nil {
		return err
	}
	defer st.release()

	glob, err := newGlobal(cfg, log, reg)
	if err != nil {
		return err
	}
	defer glob.close()
	var obs limiter.Observer = met
	if glob.observer != nil {
		obs = limiter.Observers{met, glob.observer}
	}
	lim, err := limiter.New(limiter.Config{
		DC: cfg.DC, Store: st.store, StoreTimeout: cfg.StoreTimeout, StoreTimeoutMax: cfg.StoreTimeoutMax, StorePause: st.pause,
		MaxInFlight: cfg.MaxInFlight, AdmitWait: cfg.AdmitWait, CacheKeys: cfg.CacheKeys,
		LocalKeys: cfg.MemoryKeys, Observer: obs, Logger: log,
		Quotas: glob.quotas, Instances: glob.instances,
		// In etcd a domain exists while it holds rules: one whose last
		// rule was deleted is empty, not unknown.
		AnyDomain:     cfg.RulesFile == "",
		DefaultDomain: cfg.DefaultDomain,
	})
	if err != nil {
		return fmt.Errorf("limiterd: %w", err)
	}
	defer lim.Close()
	glob.setLimiter(lim)
	if err := metrics.StoreTimeout(reg, lim.StoreTimeout); err != nil {
		return fmt.Errorf("limiterd: metrics: %w", err)
	}
	if err := metrics.CacheRatio(reg, lim.CacheStats); err != nil {
		return fmt.Errorf("limiterd: metrics: %w", err)
	}
	if err := metrics.Evictions(reg, lim.Evictions); err != nil {
		return fmt.Errorf("limiterd: metrics: %w", err)
	}

	var rules *fileRules
	if cfg.RulesFile != "" {
		rules = &fileRules{path: cfg.RulesFile, merge: cfg.MergeDomains, lim: lim, met: met, log: log}
		if err := rules.load(); err != nil {
			return fmt.Errorf("limiterd: %w", err)
		}
	} else if err := glob.watchRules(lim, met, log); err != nil {
		return err
	}
	if err := metrics.SkippedDocuments(reg, glob.skipped()); err != nil {
		return fmt.Errorf("limiterd: metrics: %w", err)
	}
	if err := metrics.HeldRules(reg, glob.held); err != nil {
		return fmt.Errorf("limiterd: metrics: %w", err)
	}
	if err := glob.registerStateSaves(reg); err != nil {
		return fmt.Errorf("limiterd: metrics: %w", err)
	}

	ecfg := envoyrls.Config{Headers: cfg.EnvoyHeaders, ShadowMode: cfg.EnvoyShadowMode, QuotaMode: cfg.EnvoyQuotaMode,
		StopIncrementWhenOverLimit: cfg.EnvoyStopIncrementWhenOverLimit, DynamicMetadata: cfg.EnvoyDynamicMetadata}
	if rules != nil {
		ecfg.Configs = rules.Tree
	}
	envoySvc := envoyrls.NewService(lim, ecfg)
	if err := metrics.EnvoyShadowOverrides(reg, envoySvc.ShadowOverrides); err != nil {
		return fmt.Errorf("limiterd: metrics: %w", err)
	}
	if cfg.EnvoyShadowMode {
		log.Warn("the Envoy API answers OK to every call over its limit, decisions counted as ever (--envoy-shadow-mode); weir_envoy_shadow_overrides_total counts them")
	}

	httpLn, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("limiterd: listen http: %w", err)
	}
	grpcLn, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		httpLn.Close()
		return fmt.Errorf("limiterd: listen grpc: %w", err)
	}
	// shuttingDown is closed when shutdown begins: /healthcheck fails
	// from then on, as gRPC health does.
	shuttingDown := make(chan struct{})
	api, err := httpapi.New(httpapi.Config{
		Limiter: lim, Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), Envoy: envoyrls.JSONHandler(envoySvc),
		Logger: log, Warnings: glob.warnings, ShuttingDown: shuttingDown,
	})
	if err != nil {
		return fmt.Errorf("limiterd: %w", err)
	}
	httpSrv := &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	tlsCfg, err := cfg.TLS.Server()
	if err != nil {
		httpLn.Close()
		grpcLn.Close()
		return fmt.Errorf("limiterd: %w", err)
	}
	var creds []grpc.ServerOption
	if tlsCfg != nil {
		creds = append(creds, grpc.Creds(credentials.NewTLS(tlsCfg)))
		httpLn = tls.NewListener(httpLn, tlsCfg)
	}
	// Clients (pkg/client) ping idle connections every 30s to notice a
	// dead limiter before their next call; grpc-go's default policy
	// (one ping per 5 minutes, none without calls) would close them.
	// Stream workers serve calls on goroutines that outlive them, whose
	// stacks have grown already; without them every call starts a
	// goroutine and grows its stack again. Calls beyond the workers get a
	// goroutine each, as without them.
	grpcSrv := grpc.NewServer(append(creds, grpc.MaxRecvMsgSize(4<<20), grpc.MaxConcurrentStreams(1024),
		grpc.NumStreamWorkers(uint32(64*runtime.GOMAXPROCS(0))),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))...)
	var proxySrv *http.Server
	var proxyLn net.Listener
	if cfg.Proxy.Upstream != "" {
		if proxySrv, proxyLn, err = newProxy(cfg.Proxy, lim, log, tlsCfg); err != nil {
			httpLn.Close()
			grpcLn.Close()
			return err
		}
	}
	hs := grpcapi.Register(grpcSrv, grpcapi.NewService(lim))
	envoyrls.Register(grpcSrv, envoySvc)

	var wg sync.WaitGroup
	gctx, stopGlobal := context.WithCancel(context.WithoutCancel(ctx))
	defer stopGlobal()
	endpoint := etcdquota.HTTPEndpoint{Scheme: "http", Addr: httpLn.Addr().String()}
	if tlsCfg != nil {
		endpoint.Scheme = "https"
	}
	glob.start(gctx, &wg, cfg.SyncTimeout, endpoint, log)
	errc := make(chan error, 4)
	wg.Go(func() {
		if err := httpSrv.Serve(httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("limiterd: http: %w", err)
		}
	})
	wg.Go(func() {
		if err := grpcSrv.Serve(grpcLn); err != nil {
			errc <- fmt.Errorf("limiterd: grpc: %w", err)
		}
	})
	if proxySrv != nil {
		wg.Go(func() {
			if err := proxySrv.Serve(proxyLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("limiterd: proxy: %w", err)
			}
		})
	}
	var dbg *http.Server
	if cfg.DebugAddr != "" {
		dbg = &http.Server{Addr: cfg.DebugAddr, Handler: pprofMux(), ReadHeaderTimeout: 5 * time.Second}
		wg.Go(func() {
			if err := dbg.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Warn("debug server", "err", err)
			}
		})
	}
	// The loops that keep the limiter's rules and store in step end at
	// shutdown, before the wait for the goroutines.
	lctx, stopLoops := context.WithCancel(ctx)
	if rules != nil {
		wg.Go(func() { rules.poll(lctx, cfg.RulesPoll) })
	}
	for _, later := range st.later {
		wg.Go(func() { later(lctx) })
	}
	// gRPC health reports the server (""), each API, and the name
	// envoyproxy/ratelimit's health checks ask for; hs.Shutdown turns them
	// all NOT_SERVING at shutdown.
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("weir.v1.Limiter", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(envoyrls.ServiceName, healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(envoyrls.HealthName, healthpb.HealthCheckResponse_SERVING)
	started := []any{"http", httpLn.Addr().String(), "grpc", grpcLn.Addr().String(), "store", storeName(cfg.Redis), "rules", cfg.RulesFile}
	if proxyLn != nil {
		started = append(started, "proxy", proxyLn.Addr().String(), "upstream", cfg.Proxy.Upstream)
	}
	log.Info("limiter started", started...)
	if cfg.Ready != nil {
		cfg.Ready(httpLn.Addr().String(), grpcLn.Addr().String())
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	log.Info("limiter shutting down", "serving_for", cfg.ShutdownDelay)
	close(shuttingDown)
	hs.Shutdown()
	if runErr == nil && cfg.ShutdownDelay > 0 {
		delay := time.NewTimer(cfg.ShutdownDelay)
		select {
		case <-delay.C:
		case runErr = <-errc:
			delay.Stop()
		}
	}
	stopLoops()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownGrace)
	defer cancel()
	if err := httpSrv.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	if proxySrv != nil {
		if err := proxySrv.Shutdown(sctx); err != nil {
			log.Warn("proxy shutdown", "err", err)
		}
	}
	if dbg != nil {
		_ = dbg.Close()
	}
	stopped := make(chan struct{})
	go func() { grpcSrv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-sctx.Done():
		grpcSrv.Stop()
		<-stopped
	}
	stopGlobal() // after the servers, so that the last requests are reported
	wg.Wait()
	log.Info("limiter stopped")
	return runErr
}

func pprofMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

func storeName(addr string) string {
	if addr == "" {
		return "memory"
	}
	return "redis"
}

// openedStore is the DC's store as openStore opened it.
type openedStore struct {
	store limiter.Store
	// pause is how long the store may pause of itself while healthy
	// (limiter.Config.StorePause: Redis's expiry at its hz).
	pause time.Duration
	// release closes the store.
	release func()
	// later are what Redis did not answer at start, to be done when it
	// answers: load the scripts and check the server (loadScriptsLater),
	// find out whether the one node named is a cluster's
	// (checkSeedLater); and, for Redis Sentinels, following the primary
	// they name (followPrimary). The caller runs each, and ends them
	// through their context.
	later []func(ctx context.Context)
}

// openStore opens the DC's store: the memory store, or Redis (one
// server or a cluster), whose scripts it loads after checking the server
// can run them.
func openStore(cfg Config) (openedStore, error) {
	if cfg.Redis == "" {
		s, err := memstore.New(memstore.Config{MaxKeys: cfg.MemoryKeys})
		if err != nil {
			return openedStore{}, fmt.Errorf("limiterd: %w", err)
		}
		return openedStore{store: s, release: func() {}}, nil
	}
	// The limiter bounds each call by its adaptive timeout; the client's
	// own timeouts are the most that may adapt to.
	timeout := cfg.StoreTimeoutMax
	tlsCfg, err := cfg.RedisTLS.Client()
	if err != nil {
		return openedStore{}, fmt.Errorf("limiterd: --redis-ca, --redis-cert, --redis-key: %w", err)
	}
	oc, err := redisClient(cfg.Redis, tlsCfg, timeout, cfg.Logger)
	if err != nil {
		return openedStore{}, err
	}
	c, closeFn := oc.client, oc.close
	var later []func(context.Context)
	if oc.later != nil {
		later = append(later, oc.later)
	}
	s, err := redisstore.New(c, redisstore.Config{ScriptPerRequest: cfg.RedisScriptPerRequest})
	if err != nil {
		_ = closeFn()
		return openedStore{}, fmt.Errorf("limiterd: %w", err)
	}
	// Load the scripts now, so the first decisions need not; a Redis that
	// is down at start is not fatal (the failure modes cover it), and is
	// checked when it answers.
	lctx, cancel := context.WithTimeout(context.Background(), scriptLoadTimeout)
	if err := s.Load(lctx); !reportLoad(cfg.Logger, err) {
		if why := refusedAccess(err); why != "" {
			cfg.Logger.Error(why, "err", err)
		} else {
			attrs := []any{"err", err}
			if closedUnanswered(err) {
				attrs = append(attrs, "hint", "Redis closed the connection without an answer: if it serves TLS alone, give --redis as rediss://… or set --redis-ca")
			}
			cfg.Logger.Warn("could not load scripts into Redis at start; will check the server's Lua (struct, Redis 6.0) and load them when it answers, meanwhile on first use", attrs...)
		}
		later = append(later, func(ctx context.Context) { loadScriptsLater(ctx, s, cfg.Logger) })
	}
	pause, hz := expiryPause(lctx, c, cfg.Logger)
	warnEviction(lctx, c, cfg.Logger)
	if !urlHas(cfg.Redis, "master_name") {
		// Through Sentinels the client is wherever they name the primary.
		warnReplica(lctx, c, cfg.Logger)
	}
	cancel()
	if cfg.StorePause != nil {
		pause = *cfg.StorePause
		cfg.Logger.Info("store calls are bounded by twice the slowest recent call plus the pause set by --store-pause", "pause", pause)
	} else {
		cfg.Logger.Info("store calls are bounded by twice the slowest recent call plus the pause Redis's expiry may take at the lowest hz of its nodes, read at start (--store-pause sets it)",
			"hz", hz, "pause", pause)
	}
	// Concurrent decisions share pipelines: one round trip, and one pair of
	// syscalls, per batch instead of per decision.
	// The coalescer bounds each decision's wait by the limiter's adaptive
	// store timeout with one timer, which spares the limiter a context and
	// a timer per decision (see limiter.BoundedDecider).
	co, err := coalesce.New(s, coalesce.Config{Timeout: timeout, Workers: 1})
	if err != nil {
		_ = closeFn()
		return openedStore{}, fmt.Errorf("limiterd: %w", err)
	}
	return openedStore{store: co, pause: pause, release: func() { co.Close(); _ = closeFn() }, later: later}, nil
}

// scriptLoadTimeout bounds one attempt to check the server and load the
// scripts.
const scriptLoadTimeout = 2 * time.Second

// reportLoad logs what redisstore.Store.Load's err says of the server,
// and reports whether that is settled: loaded (nil), or a server that
// cannot run the scripts, logged as an error. A server that did not
// answer is not settled, and not logged.
func reportLoad(log *slog.Logger, err error) (settled bool) {
	switch {
	case err == nil:
		return true
	case errors.Is(err, redisstore.ErrNoStruct):
		log.Error("Redis cannot run Weir's scripts: every decision of a counter algorithm will go to its rule's failure mode", "err", err)
		return true
	case errors.Is(err, redisstore.ErrRedisTooOld):
		log.Error("Redis is older than 6.0: a window counter's writes after its window's first, and a bucket's at a limit of 0, will fail and go to their rule's failure mode", "err", err)
		return true
	}
	return false
}

// refusedAccess returns what to tell the operator when err says Redis
// answered but refused the limiter — its password or user, or the TLS
// certificate it showed — which waiting will not mend, unlike a server
// that does not answer yet; "" for any other err. go-redis flattens some
// of these errors into text (a Sentinel's), so the text is read.
func refusedAccess(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "NOAUTH"):
		return "Redis refused the limiter's password or user (--redis): every decision goes to its rule's failure mode until they match Redis's; restart the limiter with the right ones"
	case strings.Contains(msg, "NOPERM"):
		return "Redis refused the limiter a command its ACL user may not run: every decision it needs goes to its rule's failure mode until the user may run what docs/operations.md (Redis ACL) lists"
	case strings.Contains(msg, "x509: "), strings.Contains(msg, "tls: "):
		return "the TLS connection to Redis failed (--redis rediss://): every decision goes to its rule's failure mode until it succeeds; trust Redis's CA (--redis-ca) or check the certificate's names and --redis-cert"
	}
	return ""
}

// closedUnanswered reports whether err says the server closed the
// connection without a reply: what a Redis that serves TLS alone does to
// a client speaking plain TCP.
func closedUnanswered(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// loadScriptsLater tries again, with growing waits (100ms to 10s), what
// Redis did not answer at start: the server check and the scripts' load,
// until it is settled (reportLoad) or ctx ends. Decisions meanwhile load
// the scripts they need on first use, unchecked.
func loadScriptsLater(ctx context.Context, s *redisstore.Store, log *slog.Logger) {
	bo := backoff.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}
	for bo.Wait(ctx) {
		lctx, cancel := context.WithTimeout(ctx, scriptLoadTimeout)
		err := s.Load(lctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if reportLoad(log, err) {
			if err == nil {
				log.Info("Redis answers: checked that it can run Weir's scripts, and loaded them")
			}
			return
		}
	}
}
