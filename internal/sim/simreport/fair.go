package simreport

import (
	"math"
	"sort"
)

// MaxMinFair returns the max-min fair division of capacity among the
// demands (water-filling): every demand gets min(demand, λ), the level λ
// chosen so that the shares sum to capacity, or every demand is met in
// full when they sum to at most capacity. Negative and NaN demands count
// as 0. The result has an entry for every key of demand.
func MaxMinFair(demand map[string]float64, capacity float64) map[string]float64 {
	keys := make([]string, 0, len(demand))
	for k := range demand {
		keys = append(keys, k)
	}
	d := func(k string) float64 {
		if v := demand[k]; v > 0 {
			return v
		}
		return 0
	}
	sort.Slice(keys, func(i, j int) bool {
		if d(keys[i]) != d(keys[j]) {
			return d(keys[i]) < d(keys[j])
		}
		return keys[i] < keys[j]
	})
	out := make(map[string]float64, len(keys))
	rest := math.Max(capacity, 0)
	for i, k := range keys {
		level := rest / float64(len(keys)-i)
		if d(k) <= level {
			out[k] = d(k)
			rest -= d(k)
			continue
		}
		for _, k := range keys[i:] {
			out[k] = level
		}
		break
	}
	return out
}

// fairCounts divides capacity requests among the DCs max-min fairly, in
// whole requests: MaxMinFair's shares rounded down, then the requests left
// over given one at a time, in dcs order, to DCs whose demand is not met.
func fairCounts(dcs []string, offered map[string]int, capacity int) map[string]int {
	demand := make(map[string]float64, len(dcs))
	for _, d := range dcs {
		demand[d] = float64(offered[d])
	}
	fair := MaxMinFair(demand, float64(max(capacity, 0)))
	out := make(map[string]int, len(dcs))
	left := capacity
	for _, d := range dcs {
		out[d] = min(int(math.Floor(fair[d]+1e-9)), offered[d])
		left -= out[d]
	}
	for left > 0 {
		gave := false
		for _, d := range dcs {
			if left > 0 && out[d] < offered[d] {
				out[d]++
				left--
				gave = true
			}
		}
		if !gave {
			break
		}
	}
	return out
}

// Jain returns Jain's fairness index of xs, (Σx)² / (n·Σx²): 1 when all
// are equal, 1/n when one has everything. It is 1 for an empty list and
// for all zeros (everyone treated alike).
func Jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}
