package allocate

import (
	"math"
	"slices"
)

// Apportion turns shares of a total into integers that add up, by largest
// remainder (Hamilton's method), and writes them to out (len(out) must be
// len(shares)). Shares below 0 or NaN count as 0; shares summing above 1
// are scaled down in proportion first. With q_i = share_i × total:
//
//   - the integers sum to min(total, Σ q_i rounded down), where a sum that
//     falls short of an integer only by float rounding (under a millionth
//     of a unit, or 10⁻¹⁴ of total) counts as that integer — so shares
//     that sum to 1 give integers that sum to exactly total, and one share
//     of 0.9999999999999999 gets all of it;
//   - each out[i] is floor(q_i) or that plus one (up to the same rounding):
//     the units the floors leave go one each to the largest fractional
//     parts, ties to the lower index, so the result depends only on the
//     shares and their order.
//
// total must be ≥ 0. Apportion allocates only for more than MaxStackDCs
// shares.
func Apportion(shares []float64, total int64, out []int64) {
	n := len(shares)
	if len(out) != n {
		panic("allocate: Apportion: len(out) != len(shares)")
	}
	clear(out)
	if n == 0 || total <= 0 {
		return
	}
	sum := 0.0
	for _, s := range shares {
		sum += clampShare(s)
	}
	if sum <= 0 {
		return
	}
	scale := 1.0
	if sum > 1 {
		scale = 1 / sum
	}
	t := float64(total)
	eps := max(1e-6, t*1e-14)
	var qBuf [MaxStackDCs]float64
	var idxBuf [MaxStackDCs]int
	q, idx := qBuf[:0], idxBuf[:0]
	if n > MaxStackDCs {
		q, idx = make([]float64, 0, n), make([]int, 0, n)
	}
	qsum, assigned := 0.0, int64(0)
	for i, s := range shares {
		v := min(clampShare(s)*scale*t, t)
		q = append(q, v)
		qsum += v
		out[i] = int64(math.Floor(v + eps))
		if float64(out[i]) > v+eps { // float64 of a huge floor rounded up
			out[i]--
		}
		out[i] = max(0, min(out[i], total))
		assigned += out[i]
		idx = append(idx, i)
	}
	want := min(total, int64(math.Floor(qsum+eps*float64(n))))
	// Remainders: what each q_i has beyond its integer (negative when the
	// floor took a unit for rounding).
	rem := func(i int) float64 { return q[i] - float64(out[i]) }
	switch {
	case assigned < want:
		slices.SortStableFunc(idx, func(a, b int) int { return cmpDesc(rem(a), rem(b)) })
		for j := 0; assigned < want; j = (j + 1) % n {
			out[idx[j]]++
			assigned++
		}
	case assigned > want:
		slices.SortStableFunc(idx, func(a, b int) int { return cmpDesc(rem(b), rem(a)) })
		for j := 0; assigned > want; j = (j + 1) % n {
			if out[idx[j]] > 0 {
				out[idx[j]]--
				assigned--
			}
		}
	}
}

func clampShare(s float64) float64 {
	if !(s > 0) {
		return 0
	}
	return min(s, 1)
}

// cmpDesc orders larger values first.
func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
