package usage_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/weirhq/weir/internal/dc/usage"
	"github.com/weirhq/weir/pkg/limiter"
)

// BenchmarkChecked measures the Aggregator on the decision path: one
// Checked call per op, each with one item decided by the rules named.
// "keyed" rules feed the heavy-hitter sketch under the rule's mutex;
// "parallel" runs on every core (GOMAXPROCS goroutines).
func BenchmarkChecked(b *testing.B) {
	set := compile(b)
	r := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(r, 1.1, 1, 100_000)
	keyed := func(n int, pressured bool) []*limiter.Response {
		out := make([]*limiter.Response, n)
		for i := range out {
			d := dec{rule: "per-user", key: fmt.Sprint("user-", zipf.Uint64()), allowed: true, remaining: 90}
			if pressured {
				d = dec{rule: "per-user", key: fmt.Sprint("user-", i%100)}
			}
			out[i] = response(item(b, set, d))
		}
		return out
	}
	cases := []struct {
		name  string
		cfg   usage.AggregatorConfig
		resps []*limiter.Response
	}{
		{"local-rule-skipped", usage.AggregatorConfig{}, []*limiter.Response{response(item(b, set, dec{rule: "per-ip-local", key: "192.0.2.1", allowed: true, remaining: 9}))}},
		{"keyless-rule", usage.AggregatorConfig{}, []*limiter.Response{response(item(b, set, dec{rule: "site", allowed: true, remaining: 900}))}},
		{"keyed-zipf-keys", usage.AggregatorConfig{}, keyed(4096, false)},
		{"keyed-zipf-keys-no-sketch", usage.AggregatorConfig{TopK: -1}, keyed(4096, false)},
		{"keyed-100-tracked-keys", usage.AggregatorConfig{}, keyed(4096, true)},
		{"keyed-zipf-keys+keyless+local", usage.AggregatorConfig{}, func() []*limiter.Response {
			out := keyed(4096, false)
			for _, resp := range out {
				resp.Items[0].Results = append(resp.Items[0].Results,
					result(b, set, dec{rule: "site", allowed: true, remaining: 900}),
					result(b, set, dec{rule: "per-ip-local", key: "192.0.2.1", allowed: true, remaining: 9}))
			}
			return out
		}()},
	}
	for _, c := range cases {
		n := len(c.resps)
		b.Run(c.name, func(b *testing.B) {
			agg := newAggregator(b, c.cfg)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				agg.Checked("shop", c.resps[i%n], 0)
				i++
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			agg := newAggregator(b, c.cfg)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := rand.IntN(n)
				for pb.Next() {
					agg.Checked("shop", c.resps[i%n], 0)
					i++
				}
			})
		})
	}
}
