// Package metrics exports what the limiter does as Prometheus metrics. It
// observes the limiter (limiter.Observer) and never sits inside the
// algorithms; every collector is registered on a registry the caller owns.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/pkg/breaker"
	"github.com/weirhq/weir/pkg/limiter"
)

// Limiter is a limiter.Observer that keeps Prometheus metrics. Safe for
// concurrent use.
type Limiter struct {
	decisions     *prometheus.CounterVec
	latency       prometheus.Histogram
	storeLatency  prometheus.Histogram
	storeErrors   prometheus.Counter
	fallbacks     *prometheus.CounterVec // by node and reason
	breakerState  *prometheus.GaugeVec   // by node
	cacheAbsorbed prometheus.Counter
	reloads       *prometheus.CounterVec
	rulesVersion  *prometheus.GaugeVec
	rulesLoaded   prometheus.Gauge

	// counters caches the children of decisions by decisionKey, which is
	// cheaper to look up than their label values for every result.
	counters sync.Map
	// fellBack caches the children of fallbacks by fallbackKey.
	fellBack sync.Map
}

// fallbackKey names a child of weir_store_fallbacks_total.
type fallbackKey struct {
	node   string
	reason limiter.Fallback
}

// decisionKey names a child of weir_decisions_total.
type decisionKey struct {
	domain, rule string
	result       result
	source       limiter.Source
}

type result uint8

const (
	allowed result = iota
	rejected
	shadowRejected
	refunded
)

var resultNames = [...]string{allowed: "allowed", rejected: "rejected", shadowRejected: "shadow_rejected", refunded: "refunded"}

var (
	_ limiter.Observer         = (*Limiter)(nil)
	_ limiter.FallbackObserver = (*Limiter)(nil)
	_ limiter.NodeObserver     = (*Limiter)(nil)
)

// NewLimiter creates the limiter's metrics and registers them on reg.
func NewLimiter(reg prometheus.Registerer) (*Limiter, error) {
	m := &Limiter{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_decisions_total",
			Help: "Rule decisions, by domain, rule, result (allowed, rejected, shadow_rejected, and refunded: admitted, then given back because another rule rejected the request) and source (store, cache, override_allow, override_deny, unlimited, failure_open, failure_closed, failure_local).",
		}, []string{"domain", "rule", "result", "source"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_check_duration_seconds",
			Help:    "Latency of a whole Check (all its items), as the limiter measured it.",
			Buckets: []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3},
		}),
		storeLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_store_duration_seconds",
			Help:    "Latency of store calls (one round trip each).",
			Buckets: []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3},
		}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_store_errors_total",
			Help: "Store calls that failed (timeouts, connection errors, bad replies).",
		}),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_store_breaker_state",
			Help: "The circuit breaker of each store node (a Redis Cluster primary's address; \"\" for a store of one node that names none): 0 closed, 1 open, 2 half-open. Nodes no request went to for a minute (a dead primary after its failover) are dropped.",
		}, []string{"node"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_store_fallbacks_total",
			Help: "Rule decisions that should have been the store's and went to their rules' failure modes, by store node (as weir_store_breaker_state) and reason: breaker_open, timeout (beyond the adaptive store timeout), error, shed (store requests in flight at their bound: the store was not asked).",
		}, []string{"node", "reason"}),
		cacheAbsorbed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_cache_absorbed_total",
			Help: "Rule decisions answered by the hot-key cache without a store call.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_rule_reloads_total",
			Help: "Rule set loads, by result (ok, rejected).",
		}, []string{"result"}),
		rulesVersion: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_rules_version_info",
			Help: "The rule sets in force: 1 for each domain's, labelled with its version (a digest of its content, or etcd-REVISION).",
		}, []string{"domain", "version"}),
		rulesLoaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_rules_loaded_timestamp_seconds",
			Help: "When the rule set in force was loaded.",
		}),
	}
	for _, c := range []prometheus.Collector{m.decisions, m.latency, m.storeLatency, m.storeErrors, m.breakerState, m.fallbacks, m.cacheAbsorbed, m.reloads, m.rulesVersion, m.rulesLoaded} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("rejected")
	return m, nil
}

// Checked implements limiter.Observer. A run of results with one child
// (a batch's items of one rule, mostly) is counted with one lookup.
func (m *Limiter) Checked(domain string, resp *limiter.Response, latency time.Duration) {
	m.latency.Observe(latency.Seconds())
	var run decisionKey // the child of the results since the last count
	var n float64       // how many results those are
	for i := range resp.Items {
		for j := range resp.Items[i].Results {
			r := &resp.Items[i].Results[j]
			k := decisionKey{domain: domain, rule: r.Match.Rule.Spec.ID, result: allowed, source: r.Source}
			switch {
			case r.Refunded:
				k.result = refunded
			case !r.Allowed:
				k.result = rejected
				if r.Shadow() {
					k.result = shadowRejected
				}
			}
			if r.Source == limiter.SourceCache {
				m.cacheAbsorbed.Inc()
			}
			if n > 0 && k != run {
				m.count(run, n)
				n = 0
			}
			run = k
			n++
		}
	}
	if n > 0 {
		m.count(run, n)
	}
}

// count adds n decisions to k's child (Inc, cheaper than Add, for one).
func (m *Limiter) count(k decisionKey, n float64) {
	if n == 1 {
		m.decision(k).Inc()
		return
	}
	m.decision(k).Add(n)
}

// decision returns the child of decisions for k.
func (m *Limiter) decision(k decisionKey) prometheus.Counter {
	if c, ok := m.counters.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c, _ := m.counters.LoadOrStore(k, m.decisions.WithLabelValues(k.domain, k.rule, resultNames[k.result], k.source.String()))
	return c.(prometheus.Counter)
}

// StoreCall implements limiter.Observer.
func (m *Limiter) StoreCall(latency time.Duration, err error) {
	m.storeLatency.Observe(latency.Seconds())
	if err != nil {
		m.storeErrors.Inc()
	}
}

// FellBack implements limiter.FallbackObserver.
func (m *Limiter) FellBack(node string, reason limiter.Fallback, decisions int) {
	m.fallback(fallbackKey{node, reason}).Add(float64(decisions))
}

// fallback returns the child of fallbacks for k.
func (m *Limiter) fallback(k fallbackKey) prometheus.Counter {
	if c, ok := m.fellBack.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c, _ := m.fellBack.LoadOrStore(k, m.fallbacks.WithLabelValues(k.node, k.reason.String()))
	return c.(prometheus.Counter)
}

// StoreTimeout registers weir_store_timeout_seconds, read from timeout when
// scraped (limiter.Limiter.StoreTimeout).
func StoreTimeout(reg prometheus.Registerer, timeout func() time.Duration) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_store_timeout_seconds",
		Help: "The bound on store calls in force: it adapts to the store's latency between --store-timeout and --store-timeout-max.",
	}, func() float64 { return timeout().Seconds() }))
}

// BreakerState implements limiter.Observer: the breaker of node "".
func (m *Limiter) BreakerState(s breaker.State) { m.NodeBreakerState("", s) }

// NodeBreakerState implements limiter.NodeObserver. A node's series,
// every reason of weir_store_fallbacks_total included (so that rate()
// sees the first fallback), exist from its first state.
func (m *Limiter) NodeBreakerState(node string, s breaker.State) {
	for _, r := range limiter.Fallbacks {
		m.fallback(fallbackKey{node, r})
	}
	m.breakerState.WithLabelValues(node).Set(float64(s))
}

// NodeForgotten implements limiter.NodeObserver: the node's series go.
func (m *Limiter) NodeForgotten(node string) {
	m.breakerState.DeleteLabelValues(node)
	for _, r := range limiter.Fallbacks {
		m.fellBack.Delete(fallbackKey{node, r})
		m.fallbacks.DeleteLabelValues(node, r.String())
	}
}

// RulesLoaded records one load that put in force the rule sets of
// versions, domain to version, at: weir_rules_version_info then holds
// those domains, each at its version, and no other.
func (m *Limiter) RulesLoaded(versions map[string]string, at time.Time) {
	m.reloads.WithLabelValues("ok").Inc()
	m.rulesVersion.Reset()
	for domain, version := range versions {
		m.rulesVersion.WithLabelValues(domain, version).Set(1)
	}
	m.rulesLoaded.Set(float64(at.Unix()))
}

// RulesRejected records a rule set refused (the previous one stays).
func (m *Limiter) RulesRejected() { m.reloads.WithLabelValues("rejected").Inc() }

// CacheRatio registers a gauge of the hot-key cache's hit ratio, read from
// stats when scraped.
func CacheRatio(reg prometheus.Registerer, stats func() (hits, misses uint64)) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_cache_hit_ratio",
		Help: "Hits over lookups of the hot-key cache since start.",
	}, func() float64 {
		h, m := stats()
		if h+m == 0 {
			return 0
		}
		return float64(h) / float64(h+m)
	}))
}

// Evictions registers weir_memstore_evictions_total, read from evictions
// when scraped (limiter.Limiter.Evictions): store="decisions" counts the
// keys the in-memory decision store (run without Redis) dropped before
// they expired, store="local" those of the store failure_mode local
// decides in.
func Evictions(reg prometheus.Registerer, evictions func() (store, local uint64)) error {
	for _, name := range []string{"decisions", "local"} {
		local := name == "local"
		c := prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "weir_memstore_evictions_total",
			Help:        "Keys an in-memory store dropped before they expired to make room for others (its key cap reached), by store (decisions, local).",
			ConstLabels: prometheus.Labels{"store": name},
		}, func() float64 {
			s, l := evictions()
			if local {
				return float64(l)
			}
			return float64(s)
		})
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// EnvoyShadowOverrides registers weir_envoy_shadow_overrides_total, read
// from overrides when scraped: the Envoy API calls answered OK that were
// over their limit, because of the global shadow mode
// (envoyrls.Service.ShadowOverrides).
func EnvoyShadowOverrides(reg prometheus.Registerer, overrides func() uint64) error {
	return reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "weir_envoy_shadow_overrides_total",
		Help: "Envoy API calls over their limit answered OK because of the global shadow mode (--envoy-shadow-mode); 0 without it.",
	}, func() float64 { return float64(overrides()) }))
}

// SkippedDocuments registers weir_etcd_documents_skipped_total{kind}, one
// series per kind of document, each read from its function when scraped:
// the documents read from etcd and skipped as invalid (the rule or share
// in force stays what it was).
func SkippedDocuments(reg prometheus.Registerer, kinds map[string]func() uint64) error {
	for kind, count := range kinds {
		c := prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "weir_etcd_documents_skipped_total",
			Help:        "Documents read from etcd and skipped as invalid, by kind (rule, assignment: a share or lease document, key: a key of no known shape).",
			ConstLabels: prometheus.Labels{"kind": kind},
		}, func() float64 { return float64(count()) })
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// StateSaves registers weir_state_saves_total{state, result}, read from
// saved and failed when scraped: the saves of one of the limiter's state
// files (--state-dir; state "quota" or "rules"), ok or error.
func StateSaves(reg prometheus.Registerer, state string, saved, failed func() uint64) error {
	for result, count := range map[string]func() uint64{"ok": saved, "error": failed} {
		c := prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "weir_state_saves_total",
			Help:        "Saves of the limiter's state files (--state-dir: the DC's applied shares, the rules from etcd), by state and result.",
			ConstLabels: prometheus.Labels{"state": state, "result": result},
		}, func() float64 { return float64(count()) })
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// HeldRules registers weir_rules_held_last_valid, read from held when
// scraped: the rules whose stored document is invalid and that are
// enforced at their last valid version until it is fixed or deleted.
func HeldRules(reg prometheus.Registerer, held func() int) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_rules_held_last_valid",
		Help: "Rules whose document in etcd is invalid, enforced at their last valid version until an operator fixes or deletes the document.",
	}, func() float64 { return float64(held()) }))
}
