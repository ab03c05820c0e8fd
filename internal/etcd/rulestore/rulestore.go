// Package rulestore follows the rules kept in etcd (SPEC §5): one JSON
// document per rule at etcdlayout.Layout.Rule(domain, rule_id), written by
// the admin API. A Watcher lists them, then watches for changes from the
// listing's revision (listing again after a compaction or a broken watch,
// with backoff: the loop of package listwatch), and hands every change to its Apply callback as the full
// set of rules, per domain. Limiters and coordinators use it so that a rule
// change reaches every one of them within about a second.
//
// A document that is not a valid rule — undecodable, failing validation,
// over MaxDocumentBytes, or whose domain or id differ from its key's — is
// skipped with a logged reason and counted, never loaded; the rule keeps its
// previous valid version, if any, so that a bad write cannot switch a limit
// off.
package rulestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/etcd/listwatch"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/rulefile"
)

// MaxDocumentBytes bounds one rule document.
const MaxDocumentBytes = 256 << 10

// Config configures a Watcher.
type Config struct {
	// Client talks to etcd; required. The Watcher does not close it.
	Client *clientv3.Client
	// Layout names the keys.
	Layout etcdlayout.Layout
	// Apply receives the rules in force, one Set per domain, sorted by
	// domain and id, after the first listing and after every change. An
	// error is logged; the next change is applied anyway. Required.
	Apply func(sets []rule.Set) error
	// MinBackoff and MaxBackoff pace retries (listwatch.Config). Defaults
	// 100ms and 5s.
	MinBackoff, MaxBackoff time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Watcher follows the rules in etcd. Create it with New; Run drives it.
// WaitSynced and Stats are safe for concurrent use.
type Watcher struct {
	cfg  Config
	log  *slog.Logger
	loop *listwatch.Loop

	rules map[string]map[string]rule.Rule // by domain, by id; the loop's goroutine only

	invalid, applied atomic.Uint64
}

// New returns a Watcher for cfg.
func New(cfg Config) (*Watcher, error) {
	if cfg.Client == nil || cfg.Apply == nil {
		return nil, errors.New("rulestore: Config.Client and Config.Apply are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Watcher{cfg: cfg, log: cfg.Logger, rules: map[string]map[string]rule.Rule{}}
	loop, err := listwatch.New(listwatch.Config{
		Client:     cfg.Client,
		Prefix:     cfg.Layout.Rules(),
		Handler:    (*handler)(w),
		MinBackoff: max(cfg.MinBackoff, 0),
		MaxBackoff: max(cfg.MaxBackoff, 0),
		Logger:     cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("rulestore: %w", err)
	}
	w.loop = loop
	return w, nil
}

// Stats counts what the Watcher saw.
type Stats struct {
	// Invalid counts documents skipped; Applied counts calls of Apply.
	Invalid, Applied uint64
	// Revision is the etcd revision of the rules in force.
	Revision int64
}

// Stats returns the counters.
func (w *Watcher) Stats() Stats {
	return Stats{Invalid: w.invalid.Load(), Applied: w.applied.Load(), Revision: w.loop.Revision()}
}

// WaitSynced waits for the first listing to be applied, or ctx.
func (w *Watcher) WaitSynced(ctx context.Context) error {
	if err := w.loop.Wait(ctx, 1); err != nil {
		return fmt.Errorf("rulestore: rules not listed yet: %w", err)
	}
	return nil
}

// Run lists and watches the rules until ctx is done; it returns nil then.
// A Watcher runs once.
func (w *Watcher) Run(ctx context.Context) error { return w.loop.Run(ctx) }

// handler is the Watcher as its loop sees it.
type handler Watcher

var _ listwatch.Handler = (*handler)(nil)

// Replace puts a listing of every rule in force.
func (h *handler) Replace(rev int64, kvs []listwatch.Event) {
	w := (*Watcher)(h)
	old := w.rules
	w.rules = map[string]map[string]rule.Rule{}
	for _, kv := range kvs {
		domain, id, r, err := w.decode(kv.Key, kv.Value)
		if err != nil {
			// Keep what was in force for this rule, if anything.
			if prev, ok := old[domain][id]; ok {
				w.put(domain, id, prev)
			}
			continue
		}
		w.put(domain, id, r)
	}
	w.apply(rev)
}

// Apply puts the watch's changes in force.
func (h *handler) Apply(rev int64, events []listwatch.Event) {
	w := (*Watcher)(h)
	for _, ev := range events {
		if ev.Delete {
			if domain, id, err := w.cfg.Layout.ParseRule(string(ev.Key)); err == nil {
				delete(w.rules[domain], id)
				if len(w.rules[domain]) == 0 {
					delete(w.rules, domain)
				}
			}
			continue
		}
		domain, id, r, err := w.decode(ev.Key, ev.Value)
		if err == nil {
			w.put(domain, id, r)
		}
	}
	if len(events) > 0 {
		w.apply(rev)
	}
}

func (w *Watcher) put(domain, id string, r rule.Rule) {
	if w.rules[domain] == nil {
		w.rules[domain] = map[string]rule.Rule{}
	}
	w.rules[domain][id] = r
}

// decode reads the rule at key; a bad one is logged and counted. The
// domain and id are those of the key, when it has the right shape.
func (w *Watcher) decode(key, value []byte) (domain, id string, r rule.Rule, err error) {
	domain, id, err = w.cfg.Layout.ParseRule(string(key))
	if err == nil {
		r, err = Decode(domain, id, value)
	}
	if err != nil {
		w.invalid.Add(1)
		w.log.Error("rulestore: invalid rule skipped; its previous version, if any, stays in force", "key", string(key), "err", err)
	}
	return domain, id, r, err
}

// Decode reads the rule document stored for (domain, id): strictly, with
// every check of package rule, and only if it names that domain (or none)
// and that id.
func Decode(domain, id string, value []byte) (rule.Rule, error) {
	if len(value) > MaxDocumentBytes {
		return rule.Rule{}, fmt.Errorf("rule document of %d bytes; at most %d", len(value), MaxDocumentBytes)
	}
	r, err := rulefile.ParseRule(value)
	if err != nil {
		return rule.Rule{}, err
	}
	switch {
	case r.ID != id:
		return rule.Rule{}, fmt.Errorf("document of rule %q stored as %q", r.ID, id)
	case r.Domain != "" && r.Domain != domain:
		return rule.Rule{}, fmt.Errorf("document of domain %q stored under domain %q", r.Domain, domain)
	}
	r.Domain = domain
	r.SetDefaults()
	return r, nil
}

// apply hands the rules in force to Apply.
func (w *Watcher) apply(rev int64) {
	domains := make([]string, 0, len(w.rules))
	for d := range w.rules {
		domains = append(domains, d)
	}
	sort.Strings(domains)
	sets := make([]rule.Set, 0, len(domains))
	for _, d := range domains {
		s := rule.Set{Domain: d}
		for _, r := range w.rules[d] {
			s.Rules = append(s.Rules, r)
		}
		sort.Slice(s.Rules, func(i, j int) bool { return s.Rules[i].ID < s.Rules[j].ID })
		sets = append(sets, s)
	}
	w.applied.Add(1)
	if err := w.cfg.Apply(sets); err != nil {
		w.log.Error("rulestore: rules refused", "revision", rev, "err", err)
	}
}

// Put writes a set's rules to etcd, creating the ones that do not exist
// yet with created_at and updated_at set to now; it never overwrites. It
// reports how many it created. Coordinators use it to bootstrap etcd from a
// rule file.
func Put(ctx context.Context, cli *clientv3.Client, layout etcdlayout.Layout, set rule.Set, now time.Time) (int, error) {
	created := 0
	for _, r := range set.Rules {
		r.Domain = set.Domain
		r.CreatedAt, r.UpdatedAt = now.UTC(), now.UTC()
		b, err := json.Marshal(r)
		if err != nil {
			return created, fmt.Errorf("rulestore: %w", err)
		}
		key := layout.Rule(set.Domain, r.ID)
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(clientv3.OpPut(key, string(b))).Commit()
		if err != nil {
			return created, fmt.Errorf("rulestore: put %s: %w", key, err)
		}
		if resp.Succeeded {
			created++
		}
	}
	return created, nil
}
