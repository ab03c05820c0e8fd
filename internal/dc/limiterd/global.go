package limiterd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/dc/metrics"
	"github.com/weirhq/weir/internal/dc/quota"
	"github.com/weirhq/weir/internal/dc/quota/etcdquota"
	"github.com/weirhq/weir/internal/dc/usage"
	"github.com/weirhq/weir/internal/etcd/etcdclient"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/etcd/rulestore"
	"github.com/weirhq/weir/internal/kafka/usagetopic"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

// global is the limiter's part in global quotas: the shares it enforces
// (from etcd, or static without it) and the usage it reports (to Kafka).
type global struct {
	quotas    limiter.Quotas
	instances limiter.Instances
	observer  limiter.Observer
	instance  string
	layout    etcdlayout.Layout

	table    *quota.Table
	agent    *etcdquota.Agent
	etcd     *clientv3.Client
	reporter *usage.Reporter
	meter    *usage.LimiterMeter // reads through the limiter, once built
	pub      *usagetopic.Publisher
	rules    *rulestore.Watcher
	// quotaState and rulesState are where the quota agent saves the DC's
	// assignments and the rule watcher the rules in force (--state-dir);
	// empty without.
	quotaState, rulesState string
}

// newGlobal builds the parts the configuration asks for; none without
// --dcs, --etcd and --kafka.
func newGlobal(cfg Config, log *slog.Logger, reg prometheus.Registerer) (*global, error) {
	g := &global{instance: cfg.Instance, layout: etcdlayout.Layout{Prefix: cfg.EtcdPrefix}}
	if g.instance == "" {
		g.instance = usage.NewInstanceID(cfg.DC)
	}
	dcs := cfg.DCs
	if !slices.Contains(dcs, cfg.DC) {
		dcs = append(slices.Clone(dcs), cfg.DC)
	}
	if len(dcs) > 1 || len(cfg.Etcd) > 0 {
		// The reporter (with Kafka) reads the entries the documents change.
		t, err := quota.New(quota.Config{DC: cfg.DC, DCs: dcs, Logger: log, TrackChanges: len(cfg.Kafka) > 0})
		if err != nil {
			return nil, fmt.Errorf("limiterd: %w", err)
		}
		g.table, g.quotas = t, t
	}
	if len(cfg.Etcd) > 0 {
		cli, err := etcdclient.New(cfg.etcdClient())
		if err != nil {
			return nil, fmt.Errorf("limiterd: %w", err)
		}
		g.etcd = cli
		acfg := etcdquota.Config{
			Client: cli, Table: g.table, Instance: g.instance,
			Layout: g.layout, Logger: cfg.Logger, // the agent names the DC itself
		}
		if cfg.StateDir != "" {
			if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
				cli.Close()
				return nil, fmt.Errorf("limiterd: state directory: %w", err)
			}
			acfg.StateFile = filepath.Join(cfg.StateDir, "quota-"+cfg.DC+".pb")
			g.quotaState = acfg.StateFile
			g.rulesState = filepath.Join(cfg.StateDir, "rules.pb")
		}
		g.agent, err = etcdquota.New(acfg)
		if err != nil {
			cli.Close()
			return nil, fmt.Errorf("limiterd: %w", err)
		}
		g.instances = g.agent
	}
	if len(cfg.Kafka) > 0 {
		acfg := usage.AggregatorConfig{}
		if g.table != nil {
			acfg.Shares = g.table
			acfg.KeyShares = g.table
		}
		agg, err := usage.NewAggregator(acfg)
		if err != nil {
			g.close()
			return nil, fmt.Errorf("limiterd: %w", err)
		}
		g.pub, err = usagetopic.NewPublisher(usagetopic.PublisherConfig{Brokers: cfg.Kafka, Topic: cfg.UsageTopic})
		if err != nil {
			g.close()
			return nil, fmt.Errorf("limiterd: %w", err)
		}
		rcfg := usage.ReporterConfig{DC: cfg.DC, Instance: g.instance, Source: agg, Publisher: kafkaPublisher{g.pub}, Interval: cfg.ReportInterval, Logger: cfg.Logger} // names the DC itself
		if g.table != nil {
			rcfg.Progress = g.table
			rcfg.Changed = g.table
		}
		// The coordinator's default quarantine covers ten intervals.
		iv := cfg.ReportInterval
		if iv <= 0 {
			iv = usage.DefaultInterval
		}
		g.meter = &usage.LimiterMeter{MinMemory: 10 * iv}
		rcfg.Meter, rcfg.ReadsBetween = g.meter, max(0, cfg.ReadsBetween)
		if cfg.ReadsBetween == 0 {
			rcfg.ReadsBetween = usage.DefaultReadsBetween
		}
		g.reporter, err = usage.NewReporter(rcfg)
		if err != nil {
			g.close()
			return nil, fmt.Errorf("limiterd: %w", err)
		}
		if err := reg.Register(g.reporter); err != nil {
			g.close()
			return nil, fmt.Errorf("limiterd: metrics: %w", err)
		}
		g.observer = agg
	}
	return g, nil
}

// setLimiter gives the usage readings the limiter to read through.
func (g *global) setLimiter(lim *limiter.Limiter) {
	if g.meter != nil {
		g.meter.SetLimiter(lim)
	}
}

// watchRules makes the limiter follow the rules kept in etcd.
func (g *global) watchRules(lim *limiter.Limiter, met *metrics.Limiter, log *slog.Logger) error {
	if g.etcd == nil {
		return errors.New("limiterd: rules from etcd need --etcd")
	}
	w, err := rulestore.New(rulestore.Config{Client: g.etcd, Layout: g.layout, Logger: log, StateFile: g.rulesState, Apply: func(rev int64, sets []rule.Set) error {
		compiled := make([]*ruleset.Set, 0, len(sets))
		for _, s := range sets {
			c, err := ruleset.Compile(s)
			if err != nil {
				met.RulesRejected()
				return fmt.Errorf("domain %s: %w", s.Domain, err)
			}
			compiled = append(compiled, c)
		}
		if err := lim.SetRules(compiled...); err != nil {
			met.RulesRejected()
			return err
		}
		version := "saved" // Restore's, before the first listing
		if rev > 0 {
			version = fmt.Sprintf("etcd-%d", rev)
		}
		versions := make(map[string]string, len(sets))
		for _, s := range sets {
			versions[s.Domain] = version
		}
		met.RulesLoaded(versions, time.Now())
		log.Info("rules loaded from etcd", "domains", len(sets), "version", version)
		return nil
	}})
	if err != nil {
		return fmt.Errorf("limiterd: %w", err)
	}
	g.rules = w
	return nil
}

// start runs the etcd agent and the reporter on wg until ctx is done, and
// waits up to syncTimeout for the first listing of the DC's assignments, so
// that the limiter does not serve on static shares a coordinator may have
// given away.
func (g *global) start(ctx context.Context, wg *sync.WaitGroup, syncTimeout time.Duration, http etcdquota.HTTPEndpoint, log *slog.Logger) {
	if g.agent != nil {
		g.agent.SetHTTPEndpoint(http)
	}
	if g.rules != nil {
		wg.Go(func() { _ = g.rules.Run(ctx) })
		wctx, cancel := context.WithTimeout(ctx, syncTimeout)
		if err := g.rules.WaitSynced(wctx); err != nil {
			switch n, rev, rerr := g.rules.Restore(); {
			case rerr == nil && n > 0:
				log.Warn("serving the rules saved before the restart until they are listed from etcd", "waited", syncTimeout, "rules", n, "saved_revision", rev, "err", err)
			case errors.Is(rerr, rulestore.ErrListed): // listed just now
			case rerr == nil:
				log.Warn("serving before the rules were listed from etcd", "waited", syncTimeout, "err", err)
			default:
				log.Warn("serving before the rules were listed from etcd: the saved rules are not usable", "waited", syncTimeout, "err", err, "saved", rerr)
			}
		}
		cancel()
	}
	if g.agent != nil {
		wg.Go(func() {
			if err := g.agent.Run(ctx); err != nil && ctx.Err() == nil {
				log.Error("quota agent stopped", "err", err)
			}
		})
		wctx, cancel := context.WithTimeout(ctx, syncTimeout)
		if err := g.table.WaitSynced(wctx); err != nil {
			if n := g.agent.Stats().Restored; n >= 0 {
				log.Warn("serving before the DC's assignments were listed: the saved ones cap their rules (min of static and saved), the others use static shares, until they are", "waited", syncTimeout, "saved_rules", n, "err", err)
			} else {
				log.Warn("serving before the DC's assignments were listed: global rules use static shares until they are", "waited", syncTimeout, "err", err)
			}
		}
		cancel()
	}
	if g.reporter != nil {
		wg.Go(func() {
			if err := g.reporter.Run(ctx); err != nil && ctx.Err() == nil {
				log.Error("usage reporter stopped", "err", err)
			}
		})
	}
}

// skipped returns, by kind, the counts of the etcd documents the rule
// watcher and the quota agent skipped as invalid, for
// weir_etcd_documents_skipped_total; none without etcd.
func (g *global) skipped() map[string]func() uint64 {
	kinds := map[string]func() uint64{}
	if g.rules != nil {
		kinds["rule"] = func() uint64 { return g.rules.Stats().Invalid }
	}
	if g.agent != nil {
		kinds["assignment"] = func() uint64 { return g.table.Stats().Corrupt }
		kinds["key"] = func() uint64 { return g.agent.Stats().BadKeys }
	}
	return kinds
}

// registerStateSaves registers the counts of the saves of --state-dir's
// files; none without it.
func (g *global) registerStateSaves(reg prometheus.Registerer) error {
	if g.agent != nil && g.quotaState != "" {
		st := func() etcdquota.Stats { return g.agent.Stats() }
		if err := metrics.StateSaves(reg, "quota", func() uint64 { return st().StateSaves }, func() uint64 { return st().StateSaveErrors }); err != nil {
			return err
		}
	}
	if g.rules != nil && g.rulesState != "" {
		st := func() rulestore.Stats { return g.rules.Stats() }
		if err := metrics.StateSaves(reg, "rules", func() uint64 { return st().Saves }, func() uint64 { return st().SaveErrors }); err != nil {
			return err
		}
	}
	return nil
}

// held returns how many rules are held at their last valid version; 0
// without rules from etcd.
func (g *global) held() int {
	if g.rules == nil {
		return 0
	}
	return g.rules.Stats().Held
}

// warnings says, for /readyz, which rules' documents in etcd are invalid
// and what is enforced instead.
func (g *global) warnings() []string {
	if g.rules == nil {
		return nil
	}
	var out []string
	for _, h := range g.rules.Held() {
		what := "not enforced: no valid version known"
		if h.Kept {
			what = "enforced at its last valid version (updated_at " + h.Version.UpdatedAt.Format(time.RFC3339) + ")"
		}
		out = append(out, fmt.Sprintf("rule %s in domain %s: stored document invalid (%s); %s", h.ID, h.Domain, h.Reason, what))
	}
	return out
}

// close releases the clients once the goroutines have stopped.
func (g *global) close() {
	if g.pub != nil {
		g.pub.Close()
	}
	if g.etcd != nil {
		g.etcd.Close()
	}
}

// checkDCs validates the DC names of the configuration.
func checkDCs(cfg Config) error {
	for _, d := range append([]string{cfg.DC}, cfg.DCs...) {
		if err := rule.CheckDC(d); err != nil {
			return err
		}
	}
	return nil
}

// kafkaPublisher publishes the reporter's messages to the usage topic.
type kafkaPublisher struct{ pub *usagetopic.Publisher }

var _ usage.Publisher = kafkaPublisher{}

// Publish implements usage.Publisher.
func (k kafkaPublisher) Publish(ctx context.Context, msgs []usage.Message) error {
	out := make([]usagetopic.Message, len(msgs))
	for i, m := range msgs {
		out[i] = usagetopic.Message{Key: m.Key, Value: m.Value}
	}
	return k.pub.Publish(ctx, out)
}
