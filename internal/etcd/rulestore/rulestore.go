// Package rulestore keeps the rules in etcd (SPEC §5) and follows them:
// one JSON document per rule at etcdlayout.Layout.Rule(domain, rule_id),
// written by the admin API, and beside it the rule's shadow at
// Layout.ValidRule(domain, rule_id): the last valid version of the
// document.
//
// A Watcher lists the rules and their shadows (one prefix,
// Layout.RuleDocs, so that a rule and its shadow, written in one
// transaction, arrive together), then watches for changes from the
// listing's revision (listing again after a compaction or a broken watch,
// with backoff: the loop of package listwatch), and hands every change to
// its Apply callback as the full set of rules in force, per domain.
// Limiters and coordinators use it so that a rule change reaches every
// one of them within about a second.
//
// A document that is not a valid rule (Decode: undecodable, failing
// validation, over MaxDocumentBytes, or whose domain or id differ from its
// key's) is never loaded. The rule is then held at its last valid
// version: its shadow, which every process finds, including those started
// after the corruption; without a shadow, the version the process had in
// force, if any. The Watcher logs it, counts it (Stats) and lists it
// (Held) until the document is fixed or deleted; a deleted document
// deletes the rule, whatever its shadow says.
//
// Writers keep the shadow in step: the admin API and Put write both keys
// in one transaction (PutOps, DeleteOps), with documents from Encode,
// which refuses what Decode would not read back. A Watcher with
// Config.Mirror set (the coordinators') also plans the mends of shadows
// that are out of step, and MendShadows, called by one writer at a time
// (the leading coordinator, under its fence), makes them: it copies every
// valid document to its shadow; it puts back the last valid version the
// Watcher holds in force as the shadow of a rule whose document and
// shadow are both invalid or whose shadow is missing; and it deletes the
// shadows of deleted rules. Each write is conditional on the document and
// the shadow being still at the revisions the Watcher read, so that it
// never overwrites a newer write.
package rulestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/etcd/listwatch"
	"github.com/weirhq/weir/pkg/rule"
)

// Config configures a Watcher.
type Config struct {
	// Client talks to etcd; required. The Watcher does not close it.
	Client *clientv3.Client
	// Layout names the keys.
	Layout etcdlayout.Layout
	// Apply receives the rules in force, one Set per domain, sorted by
	// domain and id, after the first listing and after every change, with
	// the etcd revision they are at (0 for the saved rules Restore
	// applies). An error is logged; the next change is applied anyway.
	// Required.
	Apply func(rev int64, sets []rule.Set) error
	// Mirror makes the Watcher plan the shadow writes the rules need, for
	// MendShadows to make: each valid document copied to its shadow when
	// the shadow differs; the version held in force put back as the
	// shadow when both the document and the shadow are invalid or the
	// shadow is missing; the shadow of a deleted rule deleted. Default
	// false: the Watcher plans nothing and MendShadows writes nothing.
	Mirror bool
	// MinBackoff and MaxBackoff pace retries (listwatch.Config). Defaults
	// 100ms and 5s.
	MinBackoff, MaxBackoff time.Duration
	// StateFile, when set, is where the Watcher saves the rules in force
	// after each change Apply took (a weirv1.RuleState, replaced whole),
	// for Restore to serve them when a restart cannot reach etcd. One file
	// per process; its directory must exist.
	StateFile string
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Watcher follows the rules in etcd. Create it with New; Run drives it.
// WaitSynced, Stats and Held are safe for concurrent use.
type Watcher struct {
	cfg  Config
	log  *slog.Logger
	loop *listwatch.Loop

	// The loop's goroutine only.
	docs    map[ref]stored  // the rules' documents, valid or not
	shadows map[ref]stored  // the rules' shadows, valid or not
	inForce map[ref]version // the version of each rule in force

	mu    sync.Mutex
	held  map[ref]Held  // rules whose document is invalid; guarded by mu
	mends map[ref]mend  // shadow writes to make; guarded by mu
	wake  chan struct{} // capacity 1: mends has work

	// applyMu orders the calls of Apply: the loop's, and Restore's, which
	// applies only before the first listing (listed).
	applyMu sync.Mutex
	listed  bool

	invalid, applied, mended, saves, saveErrors atomic.Uint64
}

type ref struct{ domain, id string }

// version is a valid version of a rule and its document.
type version struct {
	r   rule.Rule
	doc []byte
}

// stored is one document read from etcd.
type stored struct {
	raw []byte
	rev int64
	r   rule.Rule
	err error
}

// Held is a rule whose stored document is invalid.
type Held struct {
	Domain, ID string
	// Reason says why the document is invalid.
	Reason string
	// Revision is the invalid document's mod revision.
	Revision int64
	// Kept tells whether a valid version of the rule is in force;
	// Version is it then (its updated_at says which) and Document its
	// document. Without one the rule is not enforced by this process.
	Kept     bool
	Version  rule.Rule
	Document []byte
	// Shadowed tells whether the kept version is the rule's shadow in
	// etcd, which every process finds; when false it is held only in
	// this process's memory (it was in force before the shadow went bad
	// or missing), and processes started since do not enforce it until
	// the shadow is mended (MendShadows).
	Shadowed bool
}

// New returns a Watcher for cfg.
func New(cfg Config) (*Watcher, error) {
	if cfg.Client == nil || cfg.Apply == nil {
		return nil, errors.New("rulestore: Config.Client and Config.Apply are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Watcher{
		cfg: cfg, log: cfg.Logger,
		docs: map[ref]stored{}, shadows: map[ref]stored{}, inForce: map[ref]version{},
		held: map[ref]Held{}, mends: map[ref]mend{}, wake: make(chan struct{}, 1),
	}
	loop, err := listwatch.New(listwatch.Config{
		Client:     cfg.Client,
		Prefix:     cfg.Layout.RuleDocs(),
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
	// Invalid counts documents skipped (rules and shadows, and saved
	// rules Restore skipped); Applied counts calls of Apply; Mended counts
	// the shadows written or deleted by MendShadows; Saves and
	// SaveErrors count the writes of Config.StateFile.
	Invalid, Applied, Mended, Saves, SaveErrors uint64
	// Held counts the rules whose document is invalid and that are held
	// at a last valid version now; Dropped those with no valid version
	// (not enforced by this process).
	Held, Dropped int
	// Revision is the etcd revision of the rules in force.
	Revision int64
}

// Stats returns the counters.
func (w *Watcher) Stats() Stats {
	st := Stats{Invalid: w.invalid.Load(), Applied: w.applied.Load(), Mended: w.mended.Load(),
		Saves: w.saves.Load(), SaveErrors: w.saveErrors.Load(), Revision: w.loop.Revision()}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.held {
		if h.Kept {
			st.Held++
		} else {
			st.Dropped++
		}
	}
	return st
}

// Held returns the rules whose stored document is invalid, sorted by
// domain and id.
func (w *Watcher) Held() []Held {
	w.mu.Lock()
	out := make([]Held, 0, len(w.held))
	for _, h := range w.held {
		out = append(out, h)
	}
	w.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		return out[i].Domain < out[j].Domain || out[i].Domain == out[j].Domain && out[i].ID < out[j].ID
	})
	return out
}

// HeldRule returns the rule domain/id as Held lists it; ok is false
// when its document is not invalid (or it has none).
func (w *Watcher) HeldRule(domain, id string) (h Held, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok = w.held[ref{domain, id}]
	return h, ok
}

// WaitSynced waits for the first listing to be applied, or ctx.
func (w *Watcher) WaitSynced(ctx context.Context) error {
	if err := w.loop.Wait(ctx, 1); err != nil {
		return fmt.Errorf("rulestore: rules not listed yet: %w", err)
	}
	return nil
}

// Run lists and watches the rules until ctx is done; it returns nil
// then. A Watcher runs once.
func (w *Watcher) Run(ctx context.Context) error {
	return w.loop.Run(ctx)
}

// handler is the Watcher as its loop sees it.
type handler Watcher

var _ listwatch.Handler = (*handler)(nil)

// Replace takes a listing of every rule and shadow.
func (h *handler) Replace(rev int64, kvs []listwatch.Event) {
	w := (*Watcher)(h)
	touched := map[ref]bool{}
	for r := range w.docs {
		touched[r] = true
	}
	for r := range w.shadows {
		touched[r] = true
	}
	w.docs, w.shadows = map[ref]stored{}, map[ref]stored{}
	for _, kv := range kvs {
		if r, ok := w.take(kv); ok {
			touched[r] = true
		}
	}
	w.settle(touched)
	w.apply(rev)
}

// Apply takes the watch's changes.
func (h *handler) Apply(rev int64, events []listwatch.Event) {
	if len(events) == 0 {
		return
	}
	w := (*Watcher)(h)
	touched := map[ref]bool{}
	for _, ev := range events {
		if r, ok := w.take(ev); ok {
			touched[r] = true
		}
	}
	w.settle(touched)
	w.apply(rev)
}

// take records one key: a rule's document or its shadow, put or deleted.
// Documents are decoded here; a bad one is logged and counted.
func (w *Watcher) take(ev listwatch.Event) (ref, bool) {
	key := string(ev.Key)
	if domain, id, err := w.cfg.Layout.ParseRule(key); err == nil {
		r := ref{domain, id}
		if ev.Delete {
			delete(w.docs, r)
			return r, true
		}
		d := stored{raw: ev.Value, rev: ev.Revision}
		if d.r, d.err = Decode(domain, id, ev.Value); d.err != nil {
			// What is enforced instead is settle's to say: it depends on
			// the shadow, which may come later in the same listing.
			w.invalid.Add(1)
			w.log.Error("rulestore: invalid rule document", "key", key, "revision", ev.Revision, "err", d.err)
		}
		w.docs[r] = d
		return r, true
	}
	if domain, id, err := w.cfg.Layout.ParseValidRule(key); err == nil {
		r := ref{domain, id}
		if ev.Delete {
			delete(w.shadows, r)
			return r, true
		}
		d := stored{raw: ev.Value, rev: ev.Revision}
		if d.r, d.err = Decode(domain, id, ev.Value); d.err != nil {
			// Kept, invalid, for its revision: a mend is conditional on it.
			w.invalid.Add(1)
			w.log.Error("rulestore: invalid shadow of a rule skipped", "key", key, "revision", ev.Revision, "err", d.err)
		}
		w.shadows[r] = d
		return r, true
	}
	w.invalid.Add(1)
	w.log.Error("rulestore: key of no known shape skipped", "key", key)
	return ref{}, false
}

// settle decides the version in force of each touched rule: its document
// when valid; else its shadow when valid; else what was in force. It
// records the rules held at a last valid version, and the shadows to
// mend.
func (w *Watcher) settle(touched map[ref]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for r := range touched {
		d, ok := w.docs[r]
		s, hasShadow := w.shadows[r]
		shadowed := hasShadow && s.err == nil
		switch {
		case !ok:
			delete(w.inForce, r)
			delete(w.held, r)
		case d.err == nil:
			w.inForce[r] = version{r: d.r, doc: d.raw}
			delete(w.held, r)
		default:
			if shadowed {
				w.inForce[r] = version{r: s.r, doc: s.raw}
			}
			prev, kept := w.inForce[r]
			h := Held{Domain: r.domain, ID: r.id, Reason: d.err.Error(), Revision: d.rev, Kept: kept, Version: prev.r, Document: prev.doc, Shadowed: shadowed}
			if old, was := w.held[r]; !was || old.Kept != h.Kept || old.Shadowed != h.Shadowed || old.Revision != h.Revision || !old.Version.UpdatedAt.Equal(h.Version.UpdatedAt) {
				switch {
				case shadowed:
					w.log.Warn("rulestore: rule held at its last valid version, its shadow, until its document is fixed or deleted", "domain", r.domain, "rule", r.id, "version_updated_at", prev.r.UpdatedAt)
				case kept:
					w.log.Warn("rulestore: rule held at its last valid version, from memory (its shadow is invalid or missing), until its document is fixed or deleted", "domain", r.domain, "rule", r.id, "version_updated_at", prev.r.UpdatedAt)
				default:
					w.log.Error("rulestore: rule document invalid and no valid version known: the rule is not enforced", "domain", r.domain, "rule", r.id)
				}
			}
			w.held[r] = h
		}
		if w.cfg.Mirror {
			w.plan(r, d, ok, s, hasShadow)
		}
	}
}

// apply hands the rules in force to Apply.
func (w *Watcher) apply(rev int64) {
	w.applyMu.Lock()
	defer w.applyMu.Unlock()
	w.listed = true
	w.applied.Add(1)
	if err := w.cfg.Apply(rev, bySet(w.inForce)); err != nil {
		w.log.Error("rulestore: rules refused", "revision", rev, "err", err)
		return
	}
	if w.cfg.StateFile != "" {
		w.save(rev)
	}
}

// bySet groups rules into one Set per domain, sorted by domain and id.
func bySet(rules map[ref]version) []rule.Set {
	byDomain := map[string][]rule.Rule{}
	for r, x := range rules {
		byDomain[r.domain] = append(byDomain[r.domain], x.r)
	}
	domains := make([]string, 0, len(byDomain))
	for d := range byDomain {
		domains = append(domains, d)
	}
	sort.Strings(domains)
	sets := make([]rule.Set, 0, len(domains))
	for _, d := range domains {
		s := rule.Set{Domain: d, Rules: byDomain[d]}
		sort.Slice(s.Rules, func(i, j int) bool { return s.Rules[i].ID < s.Rules[j].ID })
		sets = append(sets, s)
	}
	return sets
}
