package allocate

import (
	"errors"
	"math"
	"strings"
	"testing"
)

const tol = 1e-12

func TestAllocate(t *testing.T) {
	inf := math.Inf(1)
	nan := math.NaN()
	tests := []struct {
		name string
		dcs  []DC
		want []float64
		// Checked only when wantRes is set.
		wantRes    *Result
		wantLevel  float64 // checked when >= 0
		checkLevel bool
	}{
		{name: "no DCs", dcs: nil, want: []float64{}, wantRes: &Result{}},
		{name: "single DC gets everything", dcs: []DC{{Demand: 0.1}}, want: []float64{1},
			wantRes: &Result{Level: 0.1, Headroom: 0.9, Sum: 1}},
		{name: "zero demand everywhere splits equally",
			dcs:     []DC{{}, {}, {}, {}, {}},
			want:    []float64{0.2, 0.2, 0.2, 0.2, 0.2},
			wantRes: &Result{Headroom: 1, Sum: 1}},
		{name: "all drained",
			dcs:     []DC{{Demand: 1, Drained: true}, {Demand: 0.5, Drained: true, Floor: 0.2}, {Drained: true, Pinned: true, Pin: 0.3}},
			want:    []float64{0, 0, 0},
			wantRes: &Result{}},
		{name: "one DC with all the demand, below the limit",
			dcs:  []DC{{Demand: 0.5}, {}, {}, {}, {}},
			want: []float64{0.5 + 0.008 + 0.46, 0.008, 0.008, 0.008, 0.008}},
		{name: "one DC with little of the demand still gets nearly all",
			dcs:  []DC{{}, {}, {Demand: 0.01}},
			want: []float64{0.04 / 3, 0.04 / 3, 1 - 0.08/3}},
		{name: "one DC with demand above the limit gets all of it",
			dcs:     []DC{{Demand: 2}, {}, {}, {}, {}},
			want:    []float64{1, 0, 0, 0, 0},
			wantRes: &Result{Level: 1, Congested: true, Sum: 1}},
		{name: "tie between two congested DCs",
			dcs:     []DC{{Demand: 0.8}, {Demand: 0.8}},
			want:    []float64{0.5, 0.5},
			wantRes: &Result{Level: 0.5, Congested: true, Sum: 1}},
		{name: "three-way tie",
			dcs:  []DC{{Demand: 1}, {Demand: 1}, {Demand: 1}},
			want: []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{name: "max-min: the small demand is met, the rest share the level",
			dcs:       []DC{{Demand: 0.2}, {Demand: 0.9}, {Demand: 0.9}},
			want:      []float64{0.2, 0.4, 0.4},
			wantLevel: 0.4, checkLevel: true},
		{name: "max-min with three levels of demand",
			dcs:       []DC{{Demand: 0.1}, {Demand: 0.25}, {Demand: 3}, {Demand: 0.5}},
			want:      []float64{0.1, 0.25, 0.325, 0.325},
			wantLevel: 0.325, checkLevel: true},
		{name: "infinite demand is demand above the limit",
			dcs:  []DC{{Demand: inf}, {Demand: 0.1}},
			want: []float64{0.9, 0.1}},
		{name: "headroom: equal part, then in proportion to demand",
			dcs:     []DC{{Demand: 0.3}, {Demand: 0.1}},
			want:    []float64{0.3 + 0.02 + 0.42, 0.1 + 0.02 + 0.14},
			wantRes: &Result{Level: 0.3, Headroom: 0.6, Sum: 1}},
		{name: "headroom respects ceilings and goes on to DCs with room",
			dcs:  []DC{{Demand: 0.5, Ceiling: 0.6}, {}},
			want: []float64{0.6, 0.4}},
		{name: "pin is exact, the rest is water-filled",
			dcs:  []DC{{Pinned: true, Pin: 0.3, Demand: 5}, {Demand: 0.9}, {Demand: 0.9}},
			want: []float64{0.3, 0.35, 0.35}},
		{name: "pin wins over floor, ceiling and demand",
			dcs:  []DC{{Pinned: true, Pin: 0.6, Floor: 0.7, Ceiling: 0.1}, {Demand: 1}},
			want: []float64{0.6, 0.4}},
		{name: "pins above 1 are scaled in proportion",
			dcs:     []DC{{Pinned: true, Pin: 0.8}, {Pinned: true, Pin: 0.8}, {Demand: 1, Floor: 0.1}},
			want:    []float64{0.5, 0.5, 0},
			wantRes: &Result{Congested: true, Sum: 1, PinsScaled: true, FloorsScaled: true}},
		{name: "drain wins over pin",
			dcs:  []DC{{Pinned: true, Pin: 0.5, Drained: true}, {Demand: 0.2}},
			want: []float64{0, 1}},
		{name: "pins fill everything",
			dcs:  []DC{{Pinned: true, Pin: 1}, {Demand: 1}},
			want: []float64{1, 0}},
		{name: "pins below 1 and nobody free leave the rest unassigned",
			dcs:     []DC{{Pinned: true, Pin: 0.25}, {Drained: true, Demand: 1}},
			want:    []float64{0.25, 0},
			wantRes: &Result{Sum: 0.25}},
		{name: "floor is guaranteed without demand",
			dcs:     []DC{{Floor: 0.2}, {Demand: 2}},
			want:    []float64{0.2, 0.8},
			wantRes: &Result{Level: 0.8, Congested: true, Sum: 1}},
		{name: "floor below the level counts toward the fair share",
			dcs:  []DC{{Floor: 0.3, Demand: 1}, {Demand: 1}},
			want: []float64{0.5, 0.5}},
		{name: "floor above the level holds",
			dcs:  []DC{{Floor: 0.6, Demand: 1}, {Demand: 1}},
			want: []float64{0.6, 0.4}},
		{name: "floors above 1 are scaled in proportion",
			dcs:     []DC{{Floor: 0.6}, {Floor: 0.9, Demand: 3}, {Demand: 1}},
			want:    []float64{0.4, 0.6, 0},
			wantRes: &Result{Congested: true, Sum: 1, FloorsScaled: true}},
		{name: "floors and pins above 1 scale the floors only",
			dcs:  []DC{{Pinned: true, Pin: 0.5}, {Floor: 0.5}, {Floor: 0.5}},
			want: []float64{0.5, 0.25, 0.25}},
		{name: "floor above ceiling is cut to the ceiling",
			dcs:  []DC{{Floor: 0.5, Ceiling: 0.3}, {Demand: 1}},
			want: []float64{0.3, 0.7}},
		{name: "ceiling below the fair level",
			dcs:       []DC{{Demand: 1, Ceiling: 0.2}, {Demand: 1}, {Demand: 1}},
			want:      []float64{0.2, 0.4, 0.4},
			wantLevel: 0.4, checkLevel: true},
		{name: "ceilings everywhere leave capacity unassigned",
			dcs:     []DC{{Demand: 1, Ceiling: 0.3}, {Ceiling: 0.3}},
			want:    []float64{0.3, 0.3},
			wantRes: &Result{Level: 0.3, Headroom: 0.3, Sum: 0.6}},
		{name: "ceiling 0 means no ceiling",
			dcs:  []DC{{Demand: 1, Ceiling: 0}},
			want: []float64{1}},
		{name: "NaN and negative settings count as unset",
			dcs:  []DC{{Demand: nan, Floor: -1, Ceiling: nan, Pin: nan}, {Demand: -3, Floor: nan, Ceiling: -0.5}},
			want: []float64{0.5, 0.5}},
		{name: "NaN pin counts as 0",
			dcs:  []DC{{Pinned: true, Pin: nan}, {Demand: 2}},
			want: []float64{0, 1}},
		{name: "settings above 1 are clamped",
			dcs:  []DC{{Pinned: true, Pin: 7}, {Floor: 3, Ceiling: 9}},
			want: []float64{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := make([]float64, len(tt.dcs))
			res := Allocate(tt.dcs, out)
			for i := range out {
				if math.Abs(out[i]-tt.want[i]) > tol {
					t.Errorf("share[%d] = %v, want %v (all: %v)", i, out[i], tt.want[i], out)
				}
			}
			if s := sumOf(out); s > 1 || s != res.Sum {
				t.Errorf("sum %v, Result.Sum %v; want equal and <= 1", s, res.Sum)
			}
			if tt.checkLevel && math.Abs(res.Level-tt.wantLevel) > tol {
				t.Errorf("Level = %v, want %v", res.Level, tt.wantLevel)
			}
			if w := tt.wantRes; w != nil {
				if math.Abs(res.Level-w.Level) > tol || math.Abs(res.Headroom-w.Headroom) > tol || math.Abs(res.Sum-w.Sum) > tol ||
					res.Congested != w.Congested || res.PinsScaled != w.PinsScaled || res.FloorsScaled != w.FloorsScaled {
					t.Errorf("Result = %+v, want %+v", res, *w)
				}
			}
		})
	}
}

func TestAllocateSumIsExact(t *testing.T) {
	// Thirds, tenths and sevenths do not add up to 1 in float64 without care.
	tests := []struct {
		name string
		dcs  []DC
	}{
		{"three ties", []DC{{Demand: 1}, {Demand: 1}, {Demand: 1}}},
		{"seven ties", []DC{{Demand: 1}, {Demand: 1}, {Demand: 1}, {Demand: 1}, {Demand: 1}, {Demand: 1}, {Demand: 1}}},
		{"tenth pins", []DC{{Pinned: true, Pin: 0.1}, {Pinned: true, Pin: 0.2}, {Pinned: true, Pin: 0.7}}},
		{"pins that overflow by an ulp", []DC{{Pinned: true, Pin: 0.1}, {Pinned: true, Pin: 0.2}, {Pinned: true, Pin: 0.7000000000000001}}},
		{"pins and a free DC", []DC{{Demand: 1}, {Pinned: true, Pin: 0.1}, {Pinned: true, Pin: 0.2}, {Demand: 1}}},
		{"floors of a third", []DC{{Floor: 1.0 / 3}, {Floor: 1.0 / 3}, {Floor: 1.0 / 3}, {Floor: 1.0 / 3}}},
		{"headroom thirds", []DC{{Demand: 0.1}, {Demand: 0.2}, {Demand: 0.3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := make([]float64, len(tt.dcs))
			res := Allocate(tt.dcs, out)
			if s := sumOf(out); s > 1 {
				t.Errorf("sum = %v (%v), want <= 1", s, out)
			}
			if res.Sum < 1-1e-12 {
				t.Errorf("sum = %v, want 1 (%v)", res.Sum, out)
			}
		})
	}
}

func TestAllocateDoesNotAllocate(t *testing.T) {
	for _, n := range []int{1, 5, MaxStackDCs} {
		dcs := make([]DC, n)
		for i := range dcs {
			dcs[i].Demand = float64(i+1) / float64(n)
			dcs[i].Floor = 0.01
		}
		out := make([]float64, n)
		if a := testing.AllocsPerRun(100, func() { Allocate(dcs, out) }); a != 0 {
			t.Errorf("%d DCs: %v allocations per Allocate, want 0", n, a)
		}
	}
}

func TestAllocateManyDCs(t *testing.T) {
	// Beyond MaxStackDCs Allocate allocates scratch space but gives the
	// same kind of answer.
	n := 3 * MaxStackDCs
	dcs := make([]DC, n)
	for i := range dcs {
		dcs[i].Demand = 2.0 / float64(n)
	}
	dcs[0].Demand = 0
	out := make([]float64, n)
	res := Allocate(dcs, out)
	if !res.Congested || out[0] != 0 || math.Abs(out[1]-1.0/float64(n-1)) > tol || res.Sum > 1 {
		t.Errorf("got %+v, shares %v..., want congested, share[0] 0, others 1/%d", res, out[:3], n-1)
	}
}

func TestAllocateShortOutPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("Allocate with a short out did not panic")
		}
	}()
	Allocate(make([]DC, 3), make([]float64, 2))
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		dcs     []DC
		wantErr string // "" for none
	}{
		{"empty", nil, ""},
		{"typical", []DC{{Name: "a", Floor: 0.1, Ceiling: 0.8}, {Name: "b", Pinned: true, Pin: 0.3}, {Name: "c", Drained: true}}, ""},
		{"floor equals ceiling", []DC{{Name: "a", Floor: 0.4, Ceiling: 0.4}}, ""},
		{"negative floor", []DC{{Name: "a", Floor: -0.1}}, "dc a: floor -0.1 is not in [0, 1]"},
		{"NaN ceiling", []DC{{Ceiling: math.NaN()}}, "dc #0: ceiling NaN is not in [0, 1]"},
		{"pin above 1", []DC{{Name: "a", Pinned: true, Pin: 1.5}}, "dc a: pin 1.5 is not in [0, 1]"},
		{"infinite demand", []DC{{Name: "a", Demand: math.Inf(1)}}, "dc a: demand +Inf"},
		{"floor above ceiling", []DC{{Name: "a", Floor: 0.5, Ceiling: 0.2}}, "floor 0.5 is above ceiling 0.2"},
		{"duplicate name", []DC{{Name: "a"}, {Name: "a"}}, "dc a appears twice"},
		{"pins above 1", []DC{{Pinned: true, Pin: 0.6}, {Pinned: true, Pin: 0.6}}, "pins sum to 1.2"},
		{"floors and pins above 1", []DC{{Pinned: true, Pin: 0.6}, {Floor: 0.6}}, "pins and floors sum to 1.2"},
		{"drained DC's floor does not count", []DC{{Floor: 0.6, Drained: true}, {Floor: 0.6}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.dcs)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalid)):
				t.Errorf("got %v, want an ErrInvalid containing %q", err, tt.wantErr)
			}
		})
	}
}

func sumOf(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}
