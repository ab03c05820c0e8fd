package allocate

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestRebalanceMatchesAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const dcs, entries = 4, 3000
	policies := make([]DC, 3*dcs)
	policies[0*dcs+1].Floor = 0.1 // policy 0: a floor in DC 1
	policies[1*dcs+2].Pinned = true
	policies[1*dcs+2].Pin = 0.25 // policy 1: DC 2 pinned
	policies[2*dcs+0].Drained = true
	policies[2*dcs+3].Ceiling = 0.3 // policy 2: DC 0 drained, DC 3 capped
	tab := Table{
		DCs:      dcs,
		Policies: policies,
		Policy:   make([]int32, entries),
		Demand:   make([]float64, entries*dcs),
		Share:    make([]float64, entries*dcs),
		Results:  make([]Result, entries),
	}
	for e := range entries {
		tab.Policy[e] = int32(r.IntN(3))
		for i := range dcs {
			tab.Demand[e*dcs+i] = randomValue(r, 1)
		}
	}
	sum, err := Rebalance(&tab)
	if err != nil {
		t.Fatalf("Rebalance: %v", err)
	}
	if sum.Entries != entries {
		t.Errorf("Summary.Entries = %d, want %d", sum.Entries, entries)
	}
	var want Summary
	want.Entries = entries
	row := make([]DC, dcs)
	out := make([]float64, dcs)
	for e := range entries {
		p := int(tab.Policy[e])
		copy(row, policies[p*dcs:(p+1)*dcs])
		for i := range row {
			row[i].Demand = tab.Demand[e*dcs+i]
		}
		res := Allocate(row, out)
		for i := range out {
			if got := tab.Share[e*dcs+i]; got != out[i] {
				t.Fatalf("entry %d DC %d: Rebalance share %v, Allocate share %v", e, i, got, out[i])
			}
		}
		if tab.Results[e] != res {
			t.Fatalf("entry %d: Rebalance result %+v, Allocate result %+v", e, tab.Results[e], res)
		}
		if res.Congested {
			want.Congested++
		}
	}
	if sum != want {
		t.Errorf("Summary = %+v, want %+v", sum, want)
	}
}

func TestRebalanceSub(t *testing.T) {
	tab := Table{DCs: 2, Policies: make([]DC, 2), Demand: []float64{1, 1, 0.2, 0.9, 0, 0}, Share: make([]float64, 6)}
	sub := tab.Sub(1, 2)
	if _, err := Rebalance(&sub); err != nil {
		t.Fatalf("Rebalance(Sub(1, 2)): %v", err)
	}
	want := []float64{0, 0, 0.2, 0.8, 0, 0}
	for i := range want {
		if d := tab.Share[i] - want[i]; d > tol || d < -tol {
			t.Errorf("got shares %v, want %v", tab.Share, want)
			break
		}
	}
}

func TestRebalanceShape(t *testing.T) {
	good := func() Table {
		return Table{DCs: 2, Policies: make([]DC, 4), Policy: []int32{0, 1}, Demand: make([]float64, 4), Share: make([]float64, 4), Results: make([]Result, 2)}
	}
	tests := []struct {
		name   string
		change func(*Table)
	}{
		{"no DCs", func(t *Table) { t.DCs = 0 }},
		{"ragged demand", func(t *Table) { t.Demand = t.Demand[:3] }},
		{"short share", func(t *Table) { t.Share = t.Share[:2] }},
		{"no policies", func(t *Table) { t.Policies = nil }},
		{"ragged policies", func(t *Table) { t.Policies = t.Policies[:3] }},
		{"short policy", func(t *Table) { t.Policy = t.Policy[:1] }},
		{"policy out of range", func(t *Table) { t.Policy[1] = 2 }},
		{"negative policy", func(t *Table) { t.Policy[0] = -1 }},
		{"short results", func(t *Table) { t.Results = t.Results[:1] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := good()
			tt.change(&tab)
			for i := range tab.Share {
				tab.Share[i] = -1
			}
			_, err := Rebalance(&tab)
			if !errors.Is(err, ErrShape) {
				t.Fatalf("got %v, want ErrShape", err)
			}
			for i, s := range tab.Share {
				if s != -1 {
					t.Fatalf("share[%d] written (%v) despite the error", i, s)
				}
			}
		})
	}
	tab := good()
	if _, err := Rebalance(&tab); err != nil {
		t.Errorf("good table: got %v, want nil", err)
	}
}

func TestRebalanceDoesNotAllocate(t *testing.T) {
	tab := benchTable(1000, 5)
	if a := testing.AllocsPerRun(10, func() { Rebalance(&tab) }); a != 0 {
		t.Errorf("%v allocations per Rebalance, want 0", a)
	}
}
