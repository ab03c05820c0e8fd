package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/internal/dc/metrics"
	"github.com/weirhq/weir/pkg/breaker"
	"github.com/weirhq/weir/pkg/limiter"
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
	fallbacks, states := gather(t, reg)
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

// gather returns weir_store_fallbacks_total by "node/reason" and
// weir_store_breaker_state by node.
func gather(t *testing.T, reg *prometheus.Registry) (fallbacks, states map[string]float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fallbacks, states = map[string]float64{}, map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetName() {
			case "weir_store_fallbacks_total":
				fallbacks[labels["node"]+"/"+labels["reason"]] = mt.GetCounter().GetValue()
			case "weir_store_breaker_state":
				states[labels["node"]] = mt.GetGauge().GetValue()
			}
		}
	}
	return fallbacks, states
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
