package metrics_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/internal/dc/metrics"
	"github.com/weirhq/weir/pkg/breaker"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

// Decisions that went to failure modes are counted by node and reason,
// every reason of a node present from its first breaker state (so that
// rate() sees the first one); a forgotten node's series go.
func TestFallbacksByNodeAndReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.NewLimiter(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.NodeBreakerState("a:1", breaker.Closed)
	m.NodeBreakerState("b:1", breaker.Closed)
	m.NodeBreakerState("gone:1", breaker.Closed)
	m.FellBack("a:1", limiter.FallbackShed, 16)
	m.FellBack("a:1", limiter.FallbackTimeout, 3)
	m.FellBack("a:1", limiter.FallbackShed, 1)
	m.FellBack("b:1", limiter.FallbackBreakerOpen, 5)
	m.NodeBreakerState("b:1", breaker.Open)
	m.FellBack("gone:1", limiter.FallbackError, 2)
	m.NodeForgotten("gone:1")
	fallbacks := series(t, reg, "weir_store_fallbacks_total", "node", "reason")
	states := series(t, reg, "weir_store_breaker_state", "node")
	wantFallbacks := map[string]float64{
		"a:1/shed": 17, "a:1/timeout": 3, "a:1/error": 0, "a:1/breaker_open": 0,
		"b:1/shed": 0, "b:1/timeout": 0, "b:1/error": 0, "b:1/breaker_open": 5,
	}
	wantStates := map[string]float64{"a:1": 0, "b:1": 1}
	for _, tc := range []struct {
		name      string
		got, want map[string]float64
	}{
		{"weir_store_fallbacks_total", fallbacks, wantFallbacks},
		{"weir_store_breaker_state", states, wantStates},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.got) != len(tc.want) {
				t.Fatalf("got %v, want %v", tc.got, tc.want)
			}
			for k, w := range tc.want {
				if g, ok := tc.got[k]; !ok || g != w {
					t.Errorf("%s: got %v (present %v), want %v", k, g, ok, w)
				}
			}
		})
	}
}

// Every result of a Check is counted once under its domain, rule, result
// and source, runs of one child (a batch's items of one rule) and results
// alone alike.
func TestDecisionsByRuleResultAndSource(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.NewLimiter(reg)
	if err != nil {
		t.Fatal(err)
	}
	a := &ruleset.Rule{Spec: rule.Rule{ID: "a"}}
	b := &ruleset.Rule{Spec: rule.Rule{ID: "b"}}
	shadow := &ruleset.Rule{Spec: rule.Rule{ID: "s", Shadow: true}}
	type res struct {
		rule              *ruleset.Rule
		allowed, refunded bool
		source            limiter.Source
	}
	respOf := func(items ...[]res) *limiter.Response {
		resp := &limiter.Response{}
		for _, it := range items {
			var rs []limiter.RuleResult
			for _, r := range it {
				rr := limiter.RuleResult{Source: r.source, Refunded: r.refunded}
				rr.Match.Rule, rr.Allowed = r.rule, r.allowed
				rs = append(rs, rr)
			}
			resp.Items = append(resp.Items, limiter.ItemResult{Results: rs})
		}
		return resp
	}
	store, cache := limiter.SourceStore, limiter.SourceCache
	m.Checked("api", respOf(
		[]res{{a, true, false, store}},
		[]res{{a, true, false, store}, {b, true, false, cache}},
		[]res{{a, true, false, store}},
		[]res{{a, false, false, store}},
		[]res{{a, true, true, store}, {shadow, false, false, store}},
		[]res{{a, true, false, store}},
	), time.Millisecond)
	m.Checked("api", respOf([]res{{a, true, false, store}}), time.Millisecond)
	m.Checked("other", respOf([]res{{a, false, false, cache}}), time.Millisecond)
	got := series(t, reg, "weir_decisions_total", "domain", "rule", "result", "source")
	want := map[string]float64{
		"api/a/allowed/" + store.String():         5,
		"api/a/rejected/" + store.String():        1,
		"api/a/refunded/" + store.String():        1,
		"api/b/allowed/" + cache.String():         1,
		"api/s/shadow_rejected/" + store.String(): 1,
		"other/a/rejected/" + cache.String():      1,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s: got %v (present %v), want %v", k, g, ok, w)
		}
	}
	if got := series(t, reg, "weir_cache_absorbed_total")[""]; got != 2 {
		t.Errorf("weir_cache_absorbed_total: got %v, want 2", got)
	}
}

// series returns the values of metric name (a counter or a gauge) by its
// labels' values, joined by "/".
func series(t *testing.T, reg *prometheus.Registry, name string, labels ...string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			byName := map[string]string{}
			for _, l := range mt.GetLabel() {
				byName[l.GetName()] = l.GetValue()
			}
			var key []string
			for _, l := range labels {
				key = append(key, byName[l])
			}
			v := mt.GetCounter().GetValue()
			if mt.GetGauge() != nil {
				v = mt.GetGauge().GetValue()
			}
			out[strings.Join(key, "/")] = v
		}
	}
	return out
}

func TestStoreTimeoutGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := metrics.StoreTimeout(reg, func() time.Duration { return 40 * time.Millisecond }); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "weir_store_timeout_seconds" || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("got %v, %v; want one weir_store_timeout_seconds series", mfs, err)
	}
	if got := mfs[0].GetMetric()[0].GetGauge().GetValue(); got != 0.04 {
		t.Errorf("got %v, want 0.04", got)
	}
}

// TestRulesLoadedEveryDomain: a load of several domains shows each at its
// version and counts one reload; the next load shows its domains alone.
func TestRulesLoadedEveryDomain(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.NewLimiter(reg)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_800_000_000, 0)
	steps := []struct {
		versions map[string]string
		want     map[string]float64
	}{
		{map[string]string{"api": "v1", "envoy": "e1"}, map[string]float64{"api/v1": 1, "envoy/e1": 1}},
		{map[string]string{"api": "v2"}, map[string]float64{"api/v2": 1}},
	}
	for i, s := range steps {
		m.RulesLoaded(s.versions, at)
		if got := series(t, reg, "weir_rules_version_info", "domain", "version"); !maps.Equal(got, s.want) {
			t.Errorf("load %d: weir_rules_version_info: got %v, want %v", i+1, got, s.want)
		}
		if got := series(t, reg, "weir_rule_reloads_total", "result")["ok"]; got != float64(i+1) {
			t.Errorf("load %d: reloads: got %v, want %d", i+1, got, i+1)
		}
	}
}
