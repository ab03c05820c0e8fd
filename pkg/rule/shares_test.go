package rule

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestStaticShare(t *testing.T) {
	dcs := []string{"a", "b", "c"}
	tests := []struct {
		name   string
		scope  Scope
		shares map[string]float64
		dc     string
		want   float64
	}{
		{"equal split", ScopeGlobal, nil, "a", 1.0 / 3},
		{"dc not in list joins it", ScopeGlobal, nil, "d", 0.25},
		{"local rule is whole", ScopeLocal, nil, "a", 1},
		{"listed", ScopeGlobal, map[string]float64{"a": 0.5}, "a", 0.5},
		{"unlisted split the rest", ScopeGlobal, map[string]float64{"a": 0.5}, "b", 0.25},
		{"listed above 1 scaled", ScopeGlobal, map[string]float64{"a": 0.6, "b": 0.6}, "a", 0.5},
		{"nothing left", ScopeGlobal, map[string]float64{"a": 0.6, "b": 0.4}, "c", 0},
		{"zero listed", ScopeGlobal, map[string]float64{"a": 0}, "a", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Rule{Scope: tt.scope, Shares: tt.shares}
			if got := r.StaticShare(tt.dc, dcs); math.Abs(got-tt.want) > 1e-12 || got > tt.want && tt.want > 0 && tt.scope == ScopeGlobal {
				t.Errorf("StaticShare(%q) = %v, want %v (never above)", tt.dc, got, tt.want)
			}
		})
	}
}

// The static shares of every DC of a list sum to at most 1 exactly.
func TestStaticShareSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "c", "d", "e", "f", "g"}
	for i := range 20000 {
		n := 1 + rng.IntN(len(names))
		dcs := names[:n]
		r := Rule{Scope: ScopeGlobal}
		if rng.IntN(2) == 0 {
			r.Shares = map[string]float64{}
			for _, d := range dcs {
				if rng.IntN(2) == 0 {
					r.Shares[d] = rng.Float64() / float64(1+rng.IntN(3))
				}
			}
		}
		sum := 0.0
		for _, d := range dcs {
			s := r.StaticShare(d, dcs)
			if s < 0 || s > 1 {
				t.Fatalf("case %d: share %v out of range", i, s)
			}
			sum += s
		}
		if sum > 1 {
			t.Fatalf("case %d: %v over %v sum to %v > 1", i, r.Shares, dcs, sum)
		}
	}
}

func TestCheckDC(t *testing.T) {
	for name, ok := range map[string]bool{"eu-west-1": true, "a": true, "": false, "EU": false, "-a": false, "a_b": false} {
		if err := CheckDC(name); (err == nil) != ok {
			t.Errorf("CheckDC(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}
