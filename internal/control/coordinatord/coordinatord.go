// Package coordinatord runs the coordinator process: the election and
// planning of package coordinator, the rule file, the admin HTTP endpoints,
// and — with Dev — an embedded etcd and Kafka-protocol broker so that a
// whole multi-DC system runs on one machine with nothing installed.
package coordinatord

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/internal/kafka/usagetopic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/internal/control/coordinator"
	"github.com/weirhq/weir/internal/control/planner"
	"github.com/weirhq/weir/internal/etcd/etcdclient"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/etcd/rulestore"
	"github.com/weirhq/weir/internal/platform/auth"
	"github.com/weirhq/weir/internal/platform/embedetcd"
	"github.com/weirhq/weir/internal/platform/embedkafka"
	"github.com/weirhq/weir/internal/platform/tlsconf"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/rulefile"
)

// Dev defaults: where `coordinator --dev` serves etcd and Kafka.
const (
	DevEtcdAddr  = "127.0.0.1:2379"
	DevKafkaAddr = "127.0.0.1:9092"
)

// Config configures the process.
type Config struct {
	// Etcd lists etcd endpoints; Kafka lists brokers. Required unless Dev.
	Etcd, Kafka []string
	// EtcdAuth is how the coordinator checks etcd and proves itself to it
	// (TLS files, a user); the zero value is plain connections. Dev's
	// embedded etcd takes neither.
	EtcdAuth etcdclient.Auth
	// AdminAddr serves /healthz, /metrics and /v1/... Default 127.0.0.1:8070.
	AdminAddr string
	// DCs names every DC. Required (Dev defaults to a, b, c).
	DCs []string
	// RulesFile, if set, seeds etcd: its rules that etcd does not hold yet
	// are written there at start. The rules in force are always etcd's
	// (written by the admin API and weirctl), which limiters started
	// without --rules follow too.
	RulesFile string
	// Name identifies this coordinator. Default hostname-pid.
	Name string
	// Prefix of the etcd keys. Default etcdlayout.DefaultPrefix.
	Prefix string
	// Topic and Group of the usage consumer.
	Topic, Group string
	// Interval and TTL of the assignments (default 1s, 5 × Interval).
	Interval, TTL time.Duration
	// Dev starts an embedded etcd on DevEtcd and a broker on DevKafka
	// (data in DevDir, default a temporary directory) and uses them.
	Dev    bool
	DevDir string
	// DevEtcd and DevKafka are the listen addresses of Dev's etcd and
	// broker; default DevEtcdAddr and DevKafkaAddr.
	DevEtcd, DevKafka string
	// AdminTokenFile holds the admin API's bearer tokens, one per line:
	// TOKEN [rw|ro] [NAME] (package auth), re-read when it changes. Without
	// it the admin REST API (/rate-limits, /audit) is not served.
	AdminTokenFile string
	// TLS, when its files are given, serves the admin port over TLS
	// (mutual TLS with a client CA).
	TLS tlsconf.Files
	// LimiterTLS is what the key-status fan-out trusts and presents when
	// it asks limiters that serve TLS (their instance records say so):
	// the CA that signs their certificates (default: the system's roots)
	// and, for limiters that require mutual TLS, a client certificate.
	LimiterTLS tlsconf.ClientFiles
	// PeerTLS is what a standby trusts and presents when it forwards a
	// leader-only read to the leader's admin port (served with TLS when
	// the coordinators' TLS files are given): the CA that signs the
	// coordinators' certificates (default: the system's roots) and, when
	// they require mutual TLS, a client certificate.
	PeerTLS tlsconf.ClientFiles
	// PeerURLs, when set, are the coordinators' admin base URLs
	// (scheme://host[:port], as each one's AdvertiseURL; this
	// coordinator's own may be among them, so that all can share one
	// list): a standby forwards a leader-only read, with the operator's
	// Authorization header, only to a leader whose advertised URL is one
	// of them, and answers 502 without contacting any other. Run stops at
	// start on a URL that is not such a base URL. Default none: the
	// standby forwards to whatever URL the leader's election key in etcd
	// names (see docs/operations.md, "Security").
	PeerURLs []string
	// DefaultDomain is the admin API's domain for requests naming none
	// (when it holds the rule asked for; else the only domain that does).
	// Default "default".
	DefaultDomain string
	// AdvertiseURL is this coordinator's admin URL as others should reach
	// it (published in the election, so standbys can name the leader).
	// Default derived from the listen address.
	AdvertiseURL string
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Ready, if set, is called with the admin address once serving.
	Ready func(adminAddr string)
}

// Run runs the coordinator until ctx is done.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.AdminAddr == "" {
		cfg.AdminAddr = "127.0.0.1:8070"
	}
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	var peers *adminserver.PeerURLs
	if len(cfg.PeerURLs) > 0 {
		var err error
		if peers, err = adminserver.ParsePeerURLs(cfg.PeerURLs); err != nil {
			return fmt.Errorf("coordinatord: --peer-urls: %w", err)
		}
	}
	if cfg.Dev {
		if len(cfg.DCs) == 0 {
			cfg.DCs = []string{"a", "b", "c"}
		}
		stop, err := startDev(ctx, &cfg, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	switch {
	case len(cfg.Etcd) == 0:
		return errors.New("coordinatord: --etcd is required (or --dev)")
	case len(cfg.Kafka) == 0:
		return errors.New("coordinatord: --kafka is required (or --dev)")
	case len(cfg.DCs) == 0:
		return errors.New("coordinatord: --dcs is required")
	}
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: cfg.Etcd, Auth: cfg.EtcdAuth, Logger: log})
	if err != nil {
		return fmt.Errorf("coordinatord: %w", err)
	}
	defer cli.Close()
	layout := etcdlayout.Layout{Prefix: cfg.Prefix}
	if cfg.RulesFile != "" {
		if err := seedRules(ctx, cli, layout, cfg.RulesFile, log); err != nil {
			return err
		}
	}
	rules := &etcdRules{}
	// Coordinators plan the mends of the rules' shadows (documents
	// written by other means than the admin API; shadows gone bad or
	// missing while a valid version is held in memory), so that a
	// corruption still leaves the last valid version for processes
	// started after it; the leader makes the writes (Shadows).
	watcher, err := rulestore.New(rulestore.Config{Client: cli, Layout: layout, Logger: log, Apply: rules.apply, Mirror: true})
	if err != nil {
		return fmt.Errorf("coordinatord: %w", err)
	}
	kcfg := usagetopic.ConsumerConfig{Brokers: cfg.Kafka, Topic: cfg.Topic, Group: cfg.Group}
	tlsCfg, err := cfg.TLS.Server()
	if err != nil {
		return fmt.Errorf("coordinatord: %w", err)
	}
	limiterTLS, err := cfg.LimiterTLS.Client()
	if err != nil {
		return fmt.Errorf("coordinatord: limiter TLS: %w", err)
	}
	limiters := &http.Client{Timeout: coordinator.DefaultLimiterTimeout}
	if limiterTLS != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = limiterTLS
		limiters.Transport = tr
	}
	ln, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("coordinatord: listen admin: %w", err)
	}
	if cfg.AdvertiseURL == "" {
		scheme := "http"
		if tlsCfg != nil {
			scheme = "https"
		}
		cfg.AdvertiseURL = scheme + "://" + ln.Addr().String()
	}
	if peers != nil && !peers.Allows(cfg.AdvertiseURL) {
		log.Warn("this coordinator's advertise URL is not among --peer-urls: standbys given the same list will not forward to it when it leads",
			"advertise_url", cfg.AdvertiseURL, "peer_urls", peers.String())
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	co, err := coordinator.New(coordinator.Config{
		Etcd: cli, Layout: layout, Name: cfg.Name, AdminURL: cfg.AdvertiseURL,
		Planner: planner.Config{DCs: cfg.DCs, Interval: cfg.Interval, TTL: cfg.TTL},
		Rules:   rules.get,
		Shadows: watcher,
		NewSource: func(context.Context) (coordinator.Source, error) {
			return usagetopic.NewConsumer(kcfg)
		},
		Logger:        log,
		LimiterClient: limiters,
	})
	if err != nil {
		ln.Close()
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), co.Collector())
	mux, tokens, err := adminMux(cfg, cli, layout, co, watcher.HeldRule, peers, reg, log)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("coordinatord: admin: %w", err)
		}
	})
	wg.Go(func() { _ = watcher.Run(ctx) })
	if tokens != nil {
		wg.Go(func() { _ = tokens.Run(ctx) })
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	if err := watcher.WaitSynced(wctx); err != nil {
		log.Warn("rules not listed from etcd yet; planning none until they are", "err", err)
	}
	wcancel()
	wg.Go(func() { _ = co.Run(ctx) })
	log.Info("coordinator started", "name", cfg.Name, "admin", cfg.AdvertiseURL, "admin_api", tokens != nil, "peer_urls", peers.String(), "etcd", cfg.Etcd, "kafka", cfg.Kafka, "dcs", cfg.DCs)
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr().String())
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	wg.Wait()
	log.Info("coordinator stopped")
	return runErr
}

// startDev starts the embedded etcd and broker and points cfg at them.
func startDev(ctx context.Context, cfg *Config, log *slog.Logger) (func(), error) {
	dir := cfg.DevDir
	if dir == "" {
		d, err := os.MkdirTemp("", "weir-dev-")
		if err != nil {
			return nil, fmt.Errorf("coordinatord: dev dir: %w", err)
		}
		dir = d
	}
	etcd, err := embedetcd.Start(ctx, embedetcd.Config{Dir: filepath.Join(dir, "etcd"), ClientAddr: cmp.Or(cfg.DevEtcd, DevEtcdAddr)})
	if err != nil {
		return nil, fmt.Errorf("coordinatord: --dev: %w", err)
	}
	topic := cfg.Topic
	if topic == "" {
		topic = usagetopic.Name
	}
	broker, err := embedkafka.Start(embedkafka.Config{Addr: cmp.Or(cfg.DevKafka, DevKafkaAddr), Topics: []string{topic}, DataDir: filepath.Join(dir, "kafka")})
	if err != nil {
		etcd.Close()
		return nil, fmt.Errorf("coordinatord: --dev: %w", err)
	}
	cfg.Etcd, cfg.Kafka = []string{etcd.Endpoint()}, []string{broker.Addr()}
	log.Info("dev mode: embedded etcd and Kafka-protocol broker", "etcd", etcd.Endpoint(), "kafka", broker.Addr(), "dir", dir)
	return func() {
		broker.Close()
		etcd.Close()
		if cfg.DevDir == "" {
			os.RemoveAll(dir)
		}
	}, nil
}

// APIPatterns returns the admin port's ServeMux patterns that lead to the
// admin REST API (adminserver, docs/openapi/admin.yaml): every path it
// serves falls under one of them. A port that serves the API beside the
// console (the simulator's) mounts the same.
func APIPatterns() []string {
	return []string{"/rate-limits", "/rate-limits/", "/audit", "/overview", "/cluster"}
}

// adminMux routes the admin port: /healthz and /metrics for everyone; the
// coordinator's views (/v1/...) and the admin REST API (/rate-limits,
// /audit) behind the bearer tokens of AdminTokenFile. Without a token file
// the REST API is not served and the views are open. A standby forwards
// the leader-only views to the leader when peers (nil: any) allow its URL.
func adminMux(cfg Config, cli *clientv3.Client, layout etcdlayout.Layout, co *coordinator.Coordinator, held func(domain, id string) (rulestore.Held, bool), peers *adminserver.PeerURLs, reg *prometheus.Registry, log *slog.Logger) (*http.ServeMux, *auth.File, error) {
	mux := http.NewServeMux()
	views := co.Handler()
	mux.Handle("GET /healthz", views)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if cfg.AdminTokenFile == "" {
		log.Warn("admin REST API disabled: no --admin-token-file")
		rt, err := peerTransport(cfg.PeerTLS)
		if err != nil {
			return nil, nil, err
		}
		mux.Handle("/v1/", leaderViews(co, views, adminserver.NewForwarder(rt, peers, cfg.Name, log)))
		refuse := func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"the admin API is disabled: start the coordinator with --admin-token-file"}` + "\n"))
		}
		for _, pattern := range APIPatterns() {
			mux.HandleFunc(pattern, refuse)
		}
		return mux, nil, nil
	}
	tokens, err := auth.NewFile(auth.FileConfig{Path: cfg.AdminTokenFile, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("coordinatord: %w", err)
	}
	rt, err := peerTransport(cfg.PeerTLS)
	if err != nil {
		return nil, nil, err
	}
	if peers == nil {
		log.Warn("standbys forward leader-only reads, with the operator's admin token, to whatever leader URL etcd names, unchecked: set --peer-urls")
	}
	api, err := adminserver.New(adminserver.Config{
		Etcd: cli, Layout: layout, DefaultDomain: cfg.DefaultDomain, DCs: cfg.DCs,
		Live: live{co}, Logger: log, Forward: rt, Peers: peers, Name: cfg.Name,
		Held: held,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("coordinatord: %w", err)
	}
	views = leaderViews(co, views, api.Forwarder())
	mux.Handle("/v1/", auth.Middleware(tokens, views))
	for _, pattern := range APIPatterns() {
		mux.Handle(pattern, auth.Middleware(tokens, api))
	}
	if err := mountConsole(mux, cfg, tokens, peers, log); err != nil {
		return nil, nil, err
	}
	return mux, tokens, nil
}

// peerTransport returns the transport of the requests a standby forwards
// to the leader's admin port.
func peerTransport(files tlsconf.ClientFiles) (http.RoundTripper, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tc, err := files.Client()
	if err != nil {
		return nil, fmt.Errorf("coordinatord: peer TLS: %w", err)
	}
	tr.TLSClientConfig = tc
	return tr, nil
}

// leaderViews serves the coordinator's views, forwarding those only the
// leader has (/v1/shares...) to the leader with fwd when this coordinator
// does not lead and knows who does (adminserver.Forwarder.Proxy); the
// admin REST API forwards its live views the same way
// (adminserver.Config.Forward and Peers).
func leaderViews(co *coordinator.Coordinator, views http.Handler, fwd *adminserver.Forwarder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/shares") && !co.Leader() && r.Header.Get(adminserver.ForwardedHeader) == "" {
			if _, leader, err := co.LeaderInfo(r.Context()); err == nil && leader != "" {
				fwd.Proxy(w, r, leader)
				return
			}
		}
		views.ServeHTTP(w, r)
	})
}

// etcdRules holds the rules listed from etcd, for the planner.
type etcdRules struct {
	rules atomic.Pointer[[]rule.Rule]
}

func (e *etcdRules) get() []rule.Rule {
	if p := e.rules.Load(); p != nil {
		return *p
	}
	return nil
}

func (e *etcdRules) apply(_ int64, sets []rule.Set) error {
	var all []rule.Rule
	for _, s := range sets {
		all = append(all, s.Rules...)
	}
	e.rules.Store(&all)
	return nil
}

// seedRules writes the file's rules that etcd does not hold yet.
func seedRules(ctx context.Context, cli *clientv3.Client, layout etcdlayout.Layout, path string, log *slog.Logger) error {
	set, err := rulefile.Load(path)
	if err != nil {
		return fmt.Errorf("coordinatord: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := rulestore.Put(pctx, cli, layout, set, time.Now())
	if err != nil {
		return fmt.Errorf("coordinatord: seed rules: %w", err)
	}
	log.Info("rules seeded into etcd", "file", path, "domain", set.Domain, "created", n, "already there", len(set.Rules)-n)
	return nil
}
