// Command coordinator is Weir's control plane for global quotas: one of
// several instances leads (elected through etcd), consumes the limiters'
// usage from Kafka, and writes each DC's shares to etcd. With --dev it
// embeds etcd and a Kafka-protocol broker, for running everything on one
// machine. See docs/architecture.md and docs/operations.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/weirhq/weir/internal/control/coordinatord"
	"github.com/weirhq/weir/internal/etcd/etcdclient"
	"github.com/weirhq/weir/internal/platform/envflag"
	"github.com/weirhq/weir/internal/platform/logflag"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "coordinator:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var cfg coordinatord.Config
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	etcd := fs.String("etcd", "", "comma-separated etcd endpoints, e.g. http://127.0.0.1:2379")
	kafka := fs.String("kafka", "", "comma-separated Kafka brokers, e.g. 127.0.0.1:9092")
	dcs := fs.String("dcs", "", "comma-separated names of every DC (with --dev: a,b,c)")
	fs.StringVar(&cfg.RulesFile, "rules", "", "rule file (YAML or JSON) to seed etcd with: its rules etcd does not hold yet are written there at start")
	fs.StringVar(&cfg.AdminAddr, "admin-addr", "127.0.0.1:8070", "admin HTTP listen address (/healthz, /metrics, /v1/status, /v1/shares)")
	fs.StringVar(&cfg.Name, "name", "", "this coordinator's name in the election (default hostname-pid)")
	etcdclient.AddFlags(fs, &cfg.EtcdAuth)
	fs.StringVar(&cfg.Prefix, "etcd-prefix", "", "prefix of Weir's etcd keys (default /weir/)")
	fs.StringVar(&cfg.Topic, "topic", "", "usage topic (default weir.usage)")
	fs.StringVar(&cfg.Group, "group", "", "Kafka consumer group (default weir-coordinator)")
	fs.DurationVar(&cfg.Interval, "interval", 0, "reporting and planning interval (default 1s)")
	fs.DurationVar(&cfg.TTL, "ttl", 0, "how long assignments stay in force without renewal (default 5 intervals)")
	fs.BoolVar(&cfg.Dev, "dev", false, "embed etcd (on --dev-etcd-addr) and a Kafka-protocol broker (on --dev-kafka-addr)")
	fs.StringVar(&cfg.DevEtcd, "dev-etcd-addr", coordinatord.DevEtcdAddr, "listen address of --dev's etcd")
	fs.StringVar(&cfg.DevKafka, "dev-kafka-addr", coordinatord.DevKafkaAddr, "listen address of --dev's Kafka-protocol broker")
	fs.StringVar(&cfg.DevDir, "dev-dir", "", "data directory of --dev (default a temporary directory, removed on exit)")
	fs.StringVar(&cfg.AdminTokenFile, "admin-token-file", "", "bearer tokens of the admin API, one per line: TOKEN [rw|ro] [NAME]; re-read on change (without it the REST API is off)")
	fs.StringVar(&cfg.DefaultDomain, "default-domain", "", "the admin API's domain for requests that name none (default \"default\")")
	fs.StringVar(&cfg.AdvertiseURL, "advertise-url", "", "this coordinator's admin URL as operators reach it (default from --admin-addr)")
	fs.StringVar(&cfg.TLS.Cert, "tls-cert", "", "serve the admin port over TLS with this certificate (PEM)")
	fs.StringVar(&cfg.TLS.Key, "tls-key", "", "the certificate's private key (PEM)")
	fs.StringVar(&cfg.TLS.ClientCA, "tls-client-ca", "", "require client certificates signed by this CA (mutual TLS)")
	fs.StringVar(&cfg.LimiterTLS.CA, "limiter-tls-ca", "", "trust limiters whose certificates this CA signs (PEM), when asking them for a key's status (default: the system's roots)")
	fs.StringVar(&cfg.LimiterTLS.Cert, "limiter-tls-cert", "", "client certificate (PEM) to present to limiters that require mutual TLS")
	fs.StringVar(&cfg.LimiterTLS.Key, "limiter-tls-key", "", "the client certificate's private key (PEM)")
	fs.StringVar(&cfg.PeerTLS.CA, "peer-tls-ca", "", "trust coordinators whose admin certificates this CA signs (PEM), when a standby forwards a leader-only read to the leader (default: the system's roots)")
	fs.StringVar(&cfg.PeerTLS.Cert, "peer-tls-cert", "", "client certificate (PEM) a standby presents to a leader that requires mutual TLS")
	fs.StringVar(&cfg.PeerTLS.Key, "peer-tls-key", "", "the peer client certificate's private key (PEM)")
	peerURLs := fs.String("peer-urls", "", "comma-separated admin base URLs of the coordinators (each one's --advertise-url, this one's may be among them): a standby forwards leader-only reads, with the operator's token, only to a leader whose URL is listed (default: whatever URL etcd's election key names)")
	logs := logflag.Register(fs)
	fs.Usage = envflag.Usage(fs, "WEIR", "usage: coordinator (--dev | --etcd ENDPOINTS --kafka BROKERS --dcs a,b,c) [--rules SEED_FILE] [--admin-addr ADDR]")
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
	cfg.PeerURLs = envflag.SplitList(*peerURLs)
	var err error
	if cfg.Logger, err = logs.Logger(os.Stderr); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return coordinatord.Run(ctx, cfg)
}
