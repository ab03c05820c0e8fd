package simreport_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/sim/simreport"
)

func TestMaxMinFair(t *testing.T) {
	tests := []struct {
		name     string
		demand   map[string]float64
		capacity float64
		want     map[string]float64
	}{
		{"all met", map[string]float64{"a": 0.2, "b": 0.3}, 1, map[string]float64{"a": 0.2, "b": 0.3}},
		{"one big", map[string]float64{"a": 4.0 / 3, "b": 0.1, "c": 0.1}, 1, map[string]float64{"a": 0.8, "b": 0.1, "c": 0.1}},
		{"equal split", map[string]float64{"a": 2, "b": 2, "c": 2, "d": 2}, 1, map[string]float64{"a": 0.25, "b": 0.25, "c": 0.25, "d": 0.25}},
		{"water level between", map[string]float64{"a": 0.1, "b": 0.5, "c": 0.9}, 1, map[string]float64{"a": 0.1, "b": 0.45, "c": 0.45}},
		{"no demand", map[string]float64{"a": 0, "b": -1}, 1, map[string]float64{"a": 0, "b": 0}},
		{"no capacity", map[string]float64{"a": 1}, 0, map[string]float64{"a": 0}},
		{"empty", map[string]float64{}, 1, map[string]float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := simreport.MaxMinFair(tt.demand, tt.capacity)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if !near(got[k], v) {
					t.Errorf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestJain(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"equal", []float64{0.7, 0.7, 0.7}, 1},
		{"one has all", []float64{1, 0, 0, 0}, 0.25},
		{"two to one", []float64{2, 1}, 9.0 / 10},
		{"empty", nil, 1},
		{"all zero", []float64{0, 0}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := simreport.Jain(tt.xs); !near(got, tt.want) {
				t.Errorf("Jain(%v) = %v, want %v", tt.xs, got, tt.want)
			}
		})
	}
}

// series returns a rule trace whose seconds offer the given counts (one
// slice per second, in dcs order).
func series(dcs []string, limit int64, window time.Duration, offered ...[]int) simreport.RuleTrace {
	rt := simreport.RuleTrace{RuleID: "r", Limit: limit, Window: window}
	for i, o := range offered {
		rt.Seconds = append(rt.Seconds, simreport.Second{At: time.Duration(i) * time.Second, Offered: counts(dcs, o...), Admitted: map[string]int{}})
	}
	return rt
}

// admitted returns the admitted counts of rt, one slice per second.
func admitted(dcs []string, rt simreport.RuleTrace) [][]int {
	var out [][]int
	for _, s := range rt.Seconds {
		row := make([]int, len(dcs))
		for i, d := range dcs {
			row[i] = s.Admitted[d]
		}
		out = append(out, row)
	}
	return out
}

func TestBaselines(t *testing.T) {
	tests := []struct {
		name        string
		rt          simreport.RuleTrace
		static      [][]int
		centralized [][]int
	}{
		{"one busy DC", series(dcs3, 300, time.Second, []int{400, 30, 30}, []int{0, 0, 0}),
			[][]int{{100, 30, 30}, {0, 0, 0}},
			[][]int{{240, 30, 30}, {0, 0, 0}}},
		{"under the limit", series(dcs3, 300, time.Second, []int{90, 50, 10}),
			[][]int{{90, 50, 10}},
			[][]int{{90, 50, 10}}},
		{"L/N rounded down, leftovers in DC order", series(dcs3, 200, time.Second, []int{100, 100, 100}),
			[][]int{{66, 66, 66}},
			[][]int{{67, 67, 66}}},
		{"two-second window", series(dcs3, 300, 2*time.Second, []int{400, 30, 30}, []int{400, 30, 30}, []int{400, 30, 30}, []int{400, 0, 0}),
			[][]int{{100, 30, 30}, {0, 30, 30}, {100, 30, 30}, {0, 0, 0}},
			[][]int{{240, 30, 30}, {0, 0, 0}, {240, 30, 30}, {0, 0, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := simreport.StaticSplit(tt.rt, dcs3)
			if got := admitted(dcs3, st); !reflect.DeepEqual(got, tt.static) {
				t.Errorf("static split: got %v, want %v", got, tt.static)
			}
			if got := admitted(dcs3, simreport.Centralized(tt.rt, dcs3)); !reflect.DeepEqual(got, tt.centralized) {
				t.Errorf("centralized: got %v, want %v", got, tt.centralized)
			}
			if !reflect.DeepEqual(st.Seconds[0].Offered, tt.rt.Seconds[0].Offered) {
				t.Errorf("static split: offered %v, want the trace's %v", st.Seconds[0].Offered, tt.rt.Seconds[0].Offered)
			}
			want := float64(tt.rt.Limit/3) / float64(tt.rt.Limit)
			if len(st.Shares) != len(tt.rt.Seconds) || !near(st.Shares[0].Share["dc-b"], want) {
				t.Errorf("static split: got shares %v, want floor(L/3)/L each second", st.Shares)
			}
		})
	}
}
