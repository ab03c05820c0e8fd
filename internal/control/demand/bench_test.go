package demand_test

import (
	"math/rand/v2"
	"testing"

	"github.com/weirhq/weir/internal/control/demand"
)

// BenchmarkObserve500k observes one interval of 100,000 entries over 5 DCs
// with noisy steady demand: the coordinator's estimation work per interval.
func BenchmarkObserve500k(b *testing.B) {
	e, err := demand.New(demand.Config{})
	if err != nil {
		b.Fatal(err)
	}
	const n = 500_000
	states := make([]demand.State, n)
	r := rand.New(rand.NewPCG(1, 2))
	obs := make([]float64, 1024)
	for i := range obs {
		obs[i] = 0.2 * (1 + 0.1*r.NormFloat64())
	}
	iv := int64(0)
	for ; iv < 30; iv++ {
		for i := range states {
			e.Observe(&states[i], iv, obs[(i+int(iv))%len(obs)])
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for i := range states {
			e.Observe(&states[i], iv, obs[(i+int(iv))%len(obs)])
		}
		iv++
	}
}
