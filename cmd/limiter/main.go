// Command limiter is Weir's regional limiter: it answers check requests
// over HTTP and gRPC against the DC's Redis. See docs/operations.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/etcd/etcdclient"
	"github.com/weirhq/weir/internal/platform/envflag"
	"github.com/weirhq/weir/internal/platform/logflag"
	"github.com/weirhq/weir/pkg/httplimit"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "limiter:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var cfg limiterd.Config
	fs := flag.NewFlagSet("limiter", flag.ContinueOnError)
	fs.StringVar(&cfg.DC, "dc", "local", "name of this datacenter")
	fs.StringVar(&cfg.Redis, "redis", "", "the DC's Redis: host:port, redis:// URL (with ?master_name=NAME: the URL's host and addr parameters are Redis Sentinels), or comma-separated cluster nodes; empty keeps state in memory")
	fs.StringVar(&cfg.RedisTLS.CA, "redis-ca", "", "connect to Redis over TLS, trusting the servers whose certificates this CA signs (PEM; default: the system's roots); --redis then host:port or rediss://")
	fs.StringVar(&cfg.RedisTLS.Cert, "redis-cert", "", "client certificate (PEM) presented to Redis over TLS, for Redis's tls-auth-clients; with --redis-key")
	fs.StringVar(&cfg.RedisTLS.Key, "redis-key", "", "the client certificate's private key (PEM)")
	fs.BoolVar(&cfg.RedisScriptPerRequest, "redis-script-per-request", false, "send each decision in a script call of its own, not up to 32 in one batch script: for a proxy in front of Redis that routes a script call by its first key")
	fs.StringVar(&cfg.RulesFile, "rules", "", "rule file (YAML or JSON), or a directory of them (*.yaml, *.yml at any depth, dot entries passed over: one domain each, unless --merge-domains), re-read when they change")
	fs.BoolVar(&cfg.MergeDomains, "merge-domains", false, "merge the envoyproxy/ratelimit files of --rules that name one domain into it, as MERGE_DOMAIN_CONFIG=true does (default: a domain repeated across files is refused)")
	fs.StringVar(&cfg.DefaultDomain, "default-domain", "", "rule domain of check and status requests that name none (default: the one loaded; with several loaded, such requests are refused)")
	fs.StringVar(&cfg.EnvoyHeaders.Limit, "envoy-header-limit", "", "header the Envoy API adds with the limit, e.g. RateLimit-Limit; the three --envoy-header-* are set together or not at all (no headers)")
	fs.StringVar(&cfg.EnvoyHeaders.Remaining, "envoy-header-remaining", "", "header the Envoy API adds with the remaining requests, e.g. RateLimit-Remaining")
	fs.StringVar(&cfg.EnvoyHeaders.Reset, "envoy-header-reset", "", "header the Envoy API adds with the seconds until the window resets, e.g. RateLimit-Reset")
	fs.BoolVar(&cfg.EnvoyShadowMode, "envoy-shadow-mode", false, "the Envoy API answers OK to every call over its limit, the decisions counted as ever (envoyproxy/ratelimit's SHADOW_MODE): to try limits before they apply")
	fs.BoolVar(&cfg.EnvoyQuotaMode, "envoy-quota-mode", false, "every descriptor of an envoyproxy/ratelimit configuration is in quota_mode (its QUOTA_MODE): a call is over its limit only when all its descriptors are")
	fs.BoolVar(&cfg.EnvoyStopIncrementWhenOverLimit, "envoy-stop-increment-when-over-limit", false, "on the Envoy API, a call with a descriptor over its limit spends nothing of the limits its other descriptors are under (envoyproxy/ratelimit's STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT)")
	fs.BoolVar(&cfg.EnvoyDynamicMetadata, "envoy-response-dynamic-metadata", false, "the Envoy API's answers on domains of envoyproxy/ratelimit configurations carry dynamic metadata: the domain, the descriptors and the metadata of those under their limits (its RESPONSE_DYNAMIC_METADATA)")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", "127.0.0.1:8080", "HTTP API listen address")
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", "127.0.0.1:9090", "gRPC API listen address")
	fs.DurationVar(&cfg.StoreTimeout, "store-timeout", 0, "least bound on each Redis call; the bound adapts to Redis's latency above it (default 20ms)")
	fs.DurationVar(&cfg.StoreTimeoutMax, "store-timeout-max", 0, "most the Redis call bound may adapt to; at most --store-timeout fixes it (default 10 × --store-timeout)")
	fs.Func("store-pause", "the pause a healthy Redis may take of itself (deleting expired keys), which the Redis call bound adds to twice the slowest recent call; 0 for none (default: a quarter of 1/hz at the lowest hz read from the Redis nodes at start, a node that does not answer counting as hz 10: 25ms; 0 with the memory store)", func(v string) error {
		d, err := time.ParseDuration(v)
		cfg.StorePause = &d
		return err
	})
	fs.IntVar(&cfg.MaxInFlight, "max-in-flight", 0, "bound on Redis requests (rule decisions) in flight; past it, decisions are shed to their failure modes (default 4096, negative: no bound)")
	fs.DurationVar(&cfg.AdmitWait, "admit-wait", 0, "how long a call waits for room under --max-in-flight before it is shed (default --store-timeout)")
	fs.DurationVar(&cfg.RulesPoll, "rules-poll", 0, "how often the rule file is checked for changes (default 1s)")
	fs.Int64Var(&cfg.CacheKeys, "cache-keys", 0, "hot-key cache size in keys, negative disables (default 100000)")
	fs.IntVar(&cfg.MemoryKeys, "memory-keys", 0, "cap on keys kept in memory (default 1000000)")
	fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", 0, "time in-flight requests get on shutdown (default 10s)")
	fs.DurationVar(&cfg.ShutdownDelay, "shutdown-delay", 0, "on SIGTERM, go on serving this long with health checks failing before closing the ports, for load balancers to stop sending first; a second signal cuts it short (default 0)")
	fs.StringVar(&cfg.DebugAddr, "debug-addr", "", "serve pprof profiles on this address (keep it on loopback)")
	etcd := fs.String("etcd", "", "comma-separated etcd endpoints: watch this DC's shares of global rules and register there")
	kafka := fs.String("kafka", "", "comma-separated Kafka brokers: report usage of global rules there")
	dcs := fs.String("dcs", "", "comma-separated names of every DC, for global rules' static shares (default: this DC alone)")
	etcdclient.AddFlags(fs, &cfg.EtcdAuth)
	fs.StringVar(&cfg.EtcdPrefix, "etcd-prefix", "", "prefix of Weir's etcd keys (default /weir/)")
	fs.StringVar(&cfg.UsageTopic, "usage-topic", "", "Kafka topic of usage reports (default weir.usage)")
	fs.DurationVar(&cfg.ReportInterval, "report-interval", 0, "usage reporting interval (default 1s)")
	fs.IntVar(&cfg.ReadsBetween, "reads-between", 0, "how many times between usage reports to read the long-window quota the DC holds while quiet and report it alone, at most 9; negative disables, for coordinators older than such reports (default 3)")
	fs.DurationVar(&cfg.SyncTimeout, "sync-timeout", 0, "how long to wait for the DC's assignments before serving (default 3s)")
	fs.StringVar(&cfg.StateDir, "state-dir", "", "directory (needs --etcd) where the limiter saves the DC's assignments it applied and the rules it read from etcd, so that a restart while etcd is unreachable enforces no more than before and the same rules (one per process; none by default)")
	fs.StringVar(&cfg.Instance, "instance", "", "this process's name in etcd and usage reports (default {dc}-{host}-{pid}-{random})")
	fs.StringVar(&cfg.TLS.Cert, "tls-cert", "", "serve the HTTP and gRPC APIs over TLS with this certificate (PEM)")
	fs.StringVar(&cfg.TLS.Key, "tls-key", "", "the certificate's private key (PEM)")
	fs.StringVar(&cfg.TLS.ClientCA, "tls-client-ca", "", "require client certificates signed by this CA (mutual TLS)")
	fs.StringVar(&cfg.Proxy.Upstream, "proxy-upstream", "", "reverse-proxy mode: pass allowed requests to this http(s) URL, answer rejected ones 429")
	fs.StringVar(&cfg.Proxy.Addr, "proxy-addr", "", "reverse-proxy listen address (default 127.0.0.1:8081)")
	fs.StringVar(&cfg.Proxy.Domain, "proxy-domain", "", "rule domain of proxied requests (default: --default-domain, else the one loaded)")
	proxyHeaders := fs.String("proxy-headers", "", "request headers to read as attributes, e.g. X-User-Id=user_id,X-Api-Key=api_key")
	proxyTrusted := fs.String("proxy-trusted", "", "comma-separated CIDRs or IPs of proxies in front whose X-Forwarded-For is believed")
	proxyOnError := fs.String("proxy-on-error", "allow", "a request that could not be checked: allow or reject (503)")
	logs := logflag.Register(fs)
	fs.Usage = envflag.Usage(fs, "WEIR", "usage: limiter --rules FILE [--dc NAME] [--redis ADDR] [--http-addr ADDR] [--grpc-addr ADDR] [--dcs a,b,c --etcd ENDPOINTS --kafka BROKERS]")
	if err := envflag.Parse(fs, "WEIR", args, nil); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.Etcd, cfg.Kafka, cfg.DCs = envflag.SplitList(*etcd), envflag.SplitList(*kafka), envflag.SplitList(*dcs)
	var err error
	if cfg.Proxy.Headers, err = headerMap(*proxyHeaders); err != nil {
		return err
	}
	if cfg.Proxy.TrustedProxies, err = prefixes(*proxyTrusted); err != nil {
		return err
	}
	if cfg.Proxy.OnError, err = httplimit.ParseOnError(*proxyOnError); err != nil {
		return err
	}
	if cfg.Logger, err = logs.Logger(os.Stderr); err != nil {
		return err
	}
	limiterd.RouteRedisLog(cfg.Logger)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Once shutdown begins, a second signal ends the process at once
	// (Go's default for SIGINT and SIGTERM), cutting --shutdown-delay and
	// --shutdown-grace short.
	context.AfterFunc(ctx, stop)
	return limiterd.Run(ctx, cfg)
}

// headerMap parses "Header=attribute,…".
func headerMap(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range envflag.SplitList(s) {
		h, a, ok := strings.Cut(kv, "=")
		h, a = strings.TrimSpace(h), strings.TrimSpace(a)
		if !ok || h == "" || a == "" {
			return nil, fmt.Errorf("--proxy-headers: %q is not Header=attribute", kv)
		}
		m[h] = a
	}
	return m, nil
}

// prefixes parses comma-separated CIDRs or single addresses.
func prefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range envflag.SplitList(s) {
		if !strings.Contains(v, "/") {
			a, err := netip.ParseAddr(v)
			if err != nil {
				return nil, fmt.Errorf("--proxy-trusted: %w", err)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return nil, fmt.Errorf("--proxy-trusted: %w", err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
