package allocate

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// benchTable builds entries over n DCs with 100 policies (rules) mixing
// floors, ceilings, pins and drains, and demands of every kind: about a
// third of the entries congested, a few with all demand in one DC.
func benchTable(entries, n int) Table {
	r := rand.New(rand.NewPCG(42, 42))
	const policies = 100
	tab := Table{
		DCs:      n,
		Policies: make([]DC, policies*n),
		Policy:   make([]int32, entries),
		Demand:   make([]float64, entries*n),
		Share:    make([]float64, entries*n),
	}
	for p := range policies {
		row := tab.Policies[p*n : (p+1)*n]
		for i := range row {
			row[i].Name = fmt.Sprintf("dc%d", i)
			switch r.IntN(10) {
			case 0:
				row[i].Floor = 0.05
			case 1:
				row[i].Ceiling = 0.5
			}
		}
		switch p % 20 {
		case 0:
			row[0].Pinned, row[0].Pin = true, 0.2
		case 1:
			row[n-1].Drained = true
		}
	}
	for e := range entries {
		tab.Policy[e] = int32(r.IntN(policies))
		row := tab.Demand[e*n : (e+1)*n]
		scale := 0.2 + r.Float64() // total demand around 0.2..1.2 of n×this
		for i := range row {
			row[i] = r.Float64() * scale * 2 / float64(n)
		}
		if r.IntN(20) == 0 { // all demand in one DC
			clear(row)
			row[r.IntN(n)] = r.Float64() * 2
		}
	}
	return tab
}

func BenchmarkAllocate(b *testing.B) {
	for _, n := range []int{3, 5, MaxStackDCs, 1024} {
		b.Run(fmt.Sprintf("dcs=%d", n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 1))
			dcs := make([]DC, n)
			for i := range dcs {
				dcs[i].Demand = r.Float64() * 2 / float64(n)
				dcs[i].Floor = 0.01 / float64(n)
			}
			out := make([]float64, n)
			b.ReportAllocs()
			for b.Loop() {
				Allocate(dcs, out)
			}
		})
	}
}

// BenchmarkRebalance100k rebalances 100,000 (rule, key) entries over 5 DCs
// (SPEC §7: at most 200 ms).
func BenchmarkRebalance100k(b *testing.B) {
	tab := benchTable(100_000, 5)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Rebalance(&tab); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRebalance100kParallel splits the same table over two goroutines
// with Sub, as a coordinator on this 2-core machine could.
func BenchmarkRebalance100kParallel(b *testing.B) {
	tab := benchTable(100_000, 5)
	half := tab.Len() / 2
	parts := []Table{tab.Sub(0, half), tab.Sub(half, tab.Len())}
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		for i := range parts {
			wg.Go(func() {
				if _, err := Rebalance(&parts[i]); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
}
