package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/internal/dc/metrics"
	"github.com/weirhq/weir/pkg/limiter"
)

// Decisions that went to failure modes are counted by reason, every
// reason present from the start (so that rate() sees the first one).
func TestFallbacksByReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.NewLimiter(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.FellBack(limiter.FallbackShed, 16)
	m.FellBack(limiter.FallbackTimeout, 3)
	m.FellBack(limiter.FallbackShed, 1)
	want := map[string]float64{"shed": 17, "timeout": 3, "error": 0, "breaker_open": 0}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "weir_store_fallbacks_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			got[mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for reason, w := range want {
		if got[reason] != w {
			t.Errorf("reason %s: got %v, want %v", reason, got[reason], w)
		}
	}
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
