package metrics_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/internal/dc/metrics"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

// BenchmarkChecked counts the results of a Check of 1 and of 16 items of
// one rule, all allowed by the store (the benchmarks' calls).
func BenchmarkChecked(b *testing.B) {
	m, err := metrics.NewLimiter(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	r := &ruleset.Rule{Spec: rule.Rule{ID: "under"}}
	for _, items := range []int{1, 16} {
		resp := &limiter.Response{Items: make([]limiter.ItemResult, items)}
		for i := range resp.Items {
			res := limiter.RuleResult{Source: limiter.SourceStore}
			res.Match.Rule, res.Allowed = r, true
			resp.Items[i].Results = []limiter.RuleResult{res}
		}
		b.Run("items"+strconv.Itoa(items), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m.Checked("bench", resp, time.Millisecond)
			}
		})
	}
}
