package allocate

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomValue returns a fraction of the limit, often one of the values where
// rounding and ties bite.
func randomValue(r *rand.Rand, upper float64) float64 {
	special := []float64{0, 0, 1, 0.1, 0.2, 0.3, 1.0 / 3, 0.5, 0.7, 1.0 / 7, 2.0 / 3, 1e-9}
	if r.IntN(3) == 0 {
		return min(special[r.IntN(len(special))], upper)
	}
	return r.Float64() * upper
}

func randomDCs(r *rand.Rand) []DC {
	n := 1 + r.IntN(8)
	dcs := make([]DC, n)
	for i := range dcs {
		d := &dcs[i]
		switch r.IntN(4) {
		case 0:
			d.Demand = 0
		case 1:
			d.Demand = randomValue(r, 3)
		default:
			d.Demand = randomValue(r, 1)
		}
		if r.IntN(3) == 0 {
			d.Floor = randomValue(r, 0.5)
		}
		if r.IntN(3) == 0 {
			d.Ceiling = randomValue(r, 1)
		}
		if r.IntN(6) == 0 {
			d.Pinned, d.Pin = true, randomValue(r, 0.7)
		}
		if r.IntN(10) == 0 {
			d.Drained = true
		}
	}
	return dcs
}

// TestAllocateProperties checks Allocate's contract on many random inputs:
//
//   - every share is a number in [0, 1], and the sum in index order is <= 1
//     and equals Result.Sum; floor(share×L) summed over DCs is <= L;
//   - drained DCs get 0; pins are exact unless Result.PinsScaled, and then
//     in proportion to the pins;
//   - free DCs get at most their ceiling and at least their floor (scaled
//     down in proportion when Result.FloorsScaled);
//   - max-min fairness: a free DC whose share is below its demand and its
//     ceiling gets at least as much as any free DC holding more than its
//     floor, and at least the water level;
//   - demand is met when it fits: when the free DCs' min(demand, ceiling)
//     fit, each gets at least that; otherwise no headroom is handed out;
//   - work conservation: the sum is 1 unless pins leave room that no free
//     DC may take (all at their ceilings);
//   - equal headroom: when headroom is handed out, each free DC with room
//     gets at least min(its room, EqualHeadroom/number of such DCs);
//   - a DC with all the demand, without floors, pins or ceilings, gets at
//     least 1 − EqualHeadroom.
func TestAllocateProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const cases = 20000
	for c := range cases {
		dcs := randomDCs(r)
		out := make([]float64, len(dcs))
		res := Allocate(dcs, out)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("case %d: %v\nshares %v\nresult %+v\n"+format, append([]any{c, dcs, out, res}, args...)...)
		}

		sum := 0.0
		for i, s := range out {
			if !(s >= 0 && s <= 1) {
				fail("share[%d] = %v, want in [0, 1]", i, s)
			}
			sum += s
		}
		if sum > 1 || sum != res.Sum {
			fail("sum %v, Result.Sum %v, want equal and <= 1", sum, res.Sum)
		}
		limit := float64(1 + r.Int64N(1<<40))
		whole := 0.0
		for _, s := range out {
			whole += math.Floor(s * limit)
		}
		if whole > limit {
			fail("floor(share×%v) sums to %v", limit, whole)
		}

		// Pins and drains.
		pins := 0.0
		for _, d := range dcs {
			if d.Pinned && !d.Drained {
				pins += clamp01(d.Pin)
			}
		}
		for i, d := range dcs {
			switch {
			case d.Drained:
				if out[i] != 0 {
					fail("drained share[%d] = %v, want 0", i, out[i])
				}
			case d.Pinned && !res.PinsScaled:
				if out[i] != clamp01(d.Pin) {
					fail("pinned share[%d] = %v, want exactly %v", i, out[i], d.Pin)
				}
			case d.Pinned:
				if want := clamp01(d.Pin) / max(pins, 1); math.Abs(out[i]-want) > 1e-12 {
					fail("scaled pinned share[%d] = %v, want %v", i, out[i], want)
				}
			}
		}
		if res.PinsScaled != (pins > 1) && pins <= 1-1e-12 {
			fail("PinsScaled %v with pins summing to %v", res.PinsScaled, pins)
		}

		// Floors, ceilings, and the water level.
		capacity := max(0, 1-min(pins, 1))
		floors := 0.0
		for _, d := range dcs {
			if free(d) {
				f, _, _ := limits(d, 1)
				floors += f
			}
		}
		scale := 1.0
		if floors > capacity+1e-12 {
			scale = capacity / floors
			if !res.FloorsScaled {
				fail("floors %v exceed capacity %v but FloorsScaled is false", floors, capacity)
			}
		}
		var freeIdx []int
		wants, roomy := 0.0, 0
		for i, d := range dcs {
			if !free(d) {
				continue
			}
			freeIdx = append(freeIdx, i)
			f, c, w := limits(d, scale)
			wants += w
			if out[i] > c {
				fail("share[%d] = %v above ceiling %v", i, out[i], c)
			}
			if out[i] < f-1e-12 {
				fail("share[%d] = %v below floor %v", i, out[i], f)
			}
			if out[i] < c-1e-12 {
				roomy++
			}
		}
		for _, i := range freeIdx {
			fi, ci, _ := limits(dcs[i], scale)
			unmet := out[i] < min(demand(dcs[i]), ci)-1e-12
			if !unmet {
				continue
			}
			if out[i] < min(res.Level, ci)-1e-12 {
				fail("share[%d] = %v with unmet demand is below the level %v", i, out[i], res.Level)
			}
			_ = fi
			for _, j := range freeIdx {
				fj, _, _ := limits(dcs[j], scale)
				if out[j] > fj+1e-12 && out[j] > out[i]+1e-12 {
					fail("share[%d] = %v has unmet demand while share[%d] = %v is above its floor %v and larger", i, out[i], j, out[j], fj)
				}
			}
		}
		if wants <= capacity {
			for _, i := range freeIdx {
				_, _, w := limits(dcs[i], scale)
				if out[i] < w-1e-12 {
					fail("demand fits, but share[%d] = %v below its demand %v", i, out[i], w)
				}
			}
		} else if res.Headroom != 0 {
			fail("demand does not fit, but headroom %v", res.Headroom)
		}
		demands := 0.0
		for _, i := range freeIdx {
			f, _, _ := limits(dcs[i], scale)
			demands += max(f, demand(dcs[i]))
		}
		if res.Congested != (demands > capacity) && math.Abs(demands-capacity) > 1e-12 {
			fail("Congested %v with demands %v and capacity %v", res.Congested, demands, capacity)
		}
		if roomy > 0 && capacity > 0 && sum < 1-1e-9 {
			fail("sum %v < 1 although %d free DCs are below their ceilings", sum, roomy)
		}
		if res.Headroom > 1e-12 {
			var roomIdx []int
			for _, i := range freeIdx {
				if _, c, w := limits(dcs[i], scale); c > w {
					roomIdx = append(roomIdx, i)
				}
			}
			equal := min(EqualHeadroom, res.Headroom) / float64(len(roomIdx))
			for _, i := range roomIdx {
				_, c, w := limits(dcs[i], scale)
				if got := out[i] - w; got < min(c-w, equal)-1e-12 {
					fail("share[%d] got headroom %v, want at least min(%v, %v)", i, got, c-w, equal)
				}
			}
		}
	}
}

func TestAllocateOneDCWithAllTheDemand(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for c := range 5000 {
		n := 1 + r.IntN(8)
		dcs := make([]DC, n)
		k := r.IntN(n)
		dcs[k].Demand = randomValue(r, 2)
		if dcs[k].Demand == 0 {
			dcs[k].Demand = 1e-6
		}
		for i := range dcs {
			if i != k && r.IntN(3) == 0 {
				dcs[i].Drained = true
			}
		}
		out := make([]float64, n)
		Allocate(dcs, out)
		if out[k] < 1-EqualHeadroom-1e-12 {
			t.Fatalf("case %d: %v: share of the only DC with demand = %v, want >= %v", c, dcs, out[k], 1-EqualHeadroom)
		}
	}
}

// TestAllocateOrderIndependent checks that shuffling the DCs shuffles the
// shares and changes nothing else (beyond rounding).
func TestAllocateOrderIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for c := range 5000 {
		dcs := randomDCs(r)
		out := make([]float64, len(dcs))
		Allocate(dcs, out)
		perm := r.Perm(len(dcs))
		shuffled := make([]DC, len(dcs))
		for i, p := range perm {
			shuffled[i] = dcs[p]
		}
		out2 := make([]float64, len(dcs))
		Allocate(shuffled, out2)
		for i, p := range perm {
			if math.Abs(out2[i]-out[p]) > 1e-12 {
				t.Fatalf("case %d: %v: share of DC %d is %v in order, %v shuffled", c, dcs, p, out[p], out2[i])
			}
		}
	}
}

// TestAllocateMonotone checks that raising one DC's demand never lowers its
// share, and never raises another's, when no headroom is handed out.
func TestAllocateMonotone(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for c := range 5000 {
		dcs := randomDCs(r)
		out := make([]float64, len(dcs))
		res := Allocate(dcs, out)
		k := r.IntN(len(dcs))
		more := slices.Clone(dcs)
		more[k].Demand += r.Float64()
		out2 := make([]float64, len(dcs))
		res2 := Allocate(more, out2)
		if out2[k] < out[k]-1e-12 && res.Headroom == 0 {
			t.Fatalf("case %d: %v: raising DC %d's demand lowered its share from %v to %v", c, dcs, k, out[k], out2[k])
		}
		if res.Headroom == 0 && res2.Headroom == 0 {
			for i := range out {
				if i != k && out2[i] > out[i]+1e-12 {
					t.Fatalf("case %d: %v: raising DC %d's demand raised DC %d's share from %v to %v", c, dcs, k, i, out[i], out2[i])
				}
			}
		}
	}
}

// The tests' own reading of the settings, written apart from the code under
// test.

func free(d DC) bool { return !d.Drained && !d.Pinned }

func demand(d DC) float64 {
	if math.IsNaN(d.Demand) || d.Demand < 0 {
		return 0
	}
	return d.Demand
}

// limits returns d's floor (times scale), ceiling, and the share it wants.
func limits(d DC, scale float64) (floor, ceiling, want float64) {
	ceiling = d.Ceiling
	if math.IsNaN(ceiling) || ceiling <= 0 || ceiling > 1 {
		ceiling = 1
	}
	floor = d.Floor
	if math.IsNaN(floor) || floor < 0 {
		floor = 0
	}
	floor = math.Min(floor, ceiling) * scale
	want = math.Max(floor, math.Min(demand(d), ceiling))
	return floor, ceiling, want
}
