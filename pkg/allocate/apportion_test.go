package allocate

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestApportion(t *testing.T) {
	tests := []struct {
		name   string
		shares []float64
		total  int64
		want   []int64
	}{
		{"lone DC, share rounded below 1", []float64{0.9999999999999999}, 3, []int64{3}},
		{"lone DC, whole share", []float64{1}, 1_000_000_000, []int64{1_000_000_000}},
		{"thirds of 5: ties to the lower index", []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, 5, []int64{2, 2, 1}},
		{"largest remainder wins", []float64{0.25, 0.35, 0.4}, 3, []int64{1, 1, 1}},
		{"equal remainders: the lower index", []float64{0.1, 0.1, 0.8}, 5, []int64{1, 0, 4}},
		{"sum under 1 hands out only its floor", []float64{0.3, 0.3}, 5, []int64{2, 1}},
		{"sum above 1 scaled down", []float64{1, 1}, 3, []int64{2, 1}},
		{"NaN and negatives are 0", []float64{math.NaN(), -1, 0.5}, 4, []int64{0, 0, 2}},
		{"zero total", []float64{0.5, 0.5}, 0, []int64{0, 0}},
		{"one DC holds it all among three", []float64{0, 1, 0}, 7, []int64{0, 7, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make([]int64, len(tt.shares))
			Apportion(tt.shares, tt.total, got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Apportion(%v, %d) = %v, want %v", tt.shares, tt.total, got, tt.want)
			}
		})
	}
}

// TestApportionProperties checks Apportion's contract over random totals
// (1 to 10^9), DC counts (1 to 16) and shares, among them the allocator's.
func TestApportionProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 1))
	for i := range 20000 {
		n := 1 + r.IntN(16)
		total := int64(1 + r.IntN(1_000_000_000))
		if i%3 == 0 {
			total = int64(1 + r.IntN(20))
		}
		shares := make([]float64, n)
		if i%2 == 0 {
			// The allocator's output: shares that sum to 1 (up to rounding).
			dcs := make([]DC, n)
			for d := range dcs {
				dcs[d].Demand = randomValue(r, 2)
			}
			Allocate(dcs, shares)
		} else {
			for d := range shares {
				shares[d] = randomValue(r, 1) / float64(n)
			}
		}
		got := make([]int64, n)
		Apportion(shares, total, got)
		sum, qsum := int64(0), 0.0
		for d, v := range got {
			q := shares[d] * float64(total)
			qsum += q
			if v < 0 || float64(v) < math.Floor(q)-1e-6*float64(total)-1 || float64(v) > math.Ceil(q)+1e-6 {
				t.Fatalf("Apportion(%v, %d) = %v: out[%d] = %d, want floor or ceil of %v", shares, total, got, d, v, q)
			}
			sum += v
		}
		if sum > total {
			t.Fatalf("Apportion(%v, %d) = %v sums to %d > %d", shares, total, got, sum, total)
		}
		if want := min(total, int64(math.Floor(qsum+1e-6*float64(n)+float64(total)*1e-14*float64(n)))); sum < want-1 || sum > want {
			t.Fatalf("Apportion(%v, %d) = %v sums to %d, want %d", shares, total, got, sum, want)
		}
		if s := sumFloat(shares); math.Abs(s-1) < 1e-12 && sum != total {
			t.Fatalf("shares %v sum to 1 but Apportion(…, %d) = %v sums to %d", shares, total, got, sum)
		}
	}
}

func sumFloat(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}
