package allocate

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// EqualHeadroom is how much of the headroom — the capacity left when all
// demand fits — is split in equal parts among the DCs that can take more,
// before the rest goes in proportion to demand. It is a fraction of the
// global limit: with n DCs, each gets up to EqualHeadroom/n. It keeps idle
// DCs off zero (their first requests are not all rejected while the
// coordinator notices them) while a DC that has all the demand still gets at
// least 1 − EqualHeadroom (96%) of the limit.
const EqualHeadroom = 0.04

// MaxStackDCs is the number of DCs up to which Allocate does not allocate
// memory. Beyond it Allocate allocates scratch space of O(n).
const MaxStackDCs = 32

// ErrInvalid is wrapped by Validate's errors.
var ErrInvalid = errors.New("allocate: invalid DC settings")

// DC is one datacenter's input for one entry: a rule, or one key of a rule.
// Shares, floors, ceilings and pins are fractions of the entry's global
// limit L. The zero value is a DC with no demand and no constraints.
type DC struct {
	// Name identifies the DC in errors; Allocate ignores it.
	Name string
	// Demand is the DC's estimated offered demand as a fraction of L. It
	// may exceed 1. Negative and NaN count as 0.
	Demand float64
	// Floor is the share the DC is guaranteed whatever its demand — even
	// with none, so that it can admit traffic before the coordinator has
	// seen it. Floors that do not fit in what the pins leave are scaled down
	// in proportion. A floor above the ceiling is cut to the ceiling.
	Floor float64
	// Ceiling is the largest share the DC may get; 0 means 1 (no ceiling).
	// Use Drained for a share of zero.
	Ceiling float64
	// Pin, when Pinned, is the DC's share exactly: a pin wins over demand,
	// floor and ceiling. Pins that sum above 1 are scaled down in
	// proportion.
	Pin    float64
	Pinned bool
	// Drained gives the DC a share of 0; it wins over everything, pins
	// included.
	Drained bool
}

// Result describes how Allocate reached its shares.
type Result struct {
	// Level is the water level λ: every DC that is neither drained nor
	// pinned got clamp(λ, floor, max(floor, min(demand, ceiling))) before
	// headroom. When all demand (within ceilings) fits, it is the smallest
	// level that satisfies every DC.
	Level float64
	// Congested reports that the demand (with floors) of the DCs that are
	// neither drained nor pinned exceeded the capacity the pins left: some
	// DC gets less than its demand. There is headroom only when ceilings
	// kept the DCs short of their demand from taking the whole capacity.
	Congested bool
	// Headroom is the capacity handed out beyond demand and floors.
	Headroom float64
	// Sum is the shares' sum, added in index order; it is at most 1. 1 − Sum
	// is the capacity left unassigned.
	Sum float64
	// PinsScaled reports that the pins summed above 1 and were scaled down.
	PinsScaled bool
	// FloorsScaled reports that the floors did not fit in what the pins left
	// and were scaled down.
	FloorsScaled bool
}

// Allocate writes into out[i] the share of dcs[i] and reports how it got
// there. The package documentation gives the rules. out must be at least as
// long as dcs; Allocate panics otherwise, as an out-of-range index would.
// It never fails: negative and NaN settings count as unset, and floors,
// ceilings and pins above 1 as 1 (a demand may exceed 1; an infinite one is
// demand above the limit); Validate reports such settings for callers that
// take them from operators.
func Allocate(dcs []DC, out []float64) Result {
	var evBuf [2 * MaxStackDCs]event
	var dcBuf [MaxStackDCs]norm
	ev, dc := evBuf[:], dcBuf[:]
	if len(dcs) > MaxStackDCs {
		ev, dc = make([]event, 2*len(dcs)), make([]norm, len(dcs))
	}
	return allocate(dcs, out[:len(dcs)], dc[:len(dcs)], ev)
}

// norm is one DC's settings, sanitised, during one Allocate call.
type norm struct {
	floor   float64 // scaled once the floors' scale is known
	ceiling float64 // in (0, 1]
	want    float64 // max(floor, min(demand, ceiling))
	demand  float64 // >= 0, may be +Inf
	free    bool    // neither drained nor pinned
}

func clamp01(x float64) float64 {
	if !(x > 0) {
		return 0
	}
	return min(x, 1)
}

// allocate is Allocate with caller-provided scratch space: len(out) and
// len(dc) are len(dcs), len(ev) at least twice that.
func allocate(dcs []DC, out []float64, dc []norm, ev []event) Result {
	var res Result

	// 1 and 2: drains and pins.
	pins := 0.0
	for i, d := range dcs {
		out[i] = 0
		if d.Pinned && !d.Drained {
			pins += clamp01(d.Pin)
		}
	}
	pinScale := 1.0
	if pins > 1 {
		pinScale = 1 / pins
		res.PinsScaled = true
	}
	pins = 0
	floors := 0.0
	for i, d := range dcs {
		n := &dc[i]
		*n = norm{}
		switch {
		case d.Drained:
		case d.Pinned:
			out[i] = min(clamp01(d.Pin)*pinScale, 1)
			pins += out[i]
		default:
			n.free = true
			n.ceiling = d.Ceiling
			if !(n.ceiling > 0) || n.ceiling > 1 {
				n.ceiling = 1
			}
			n.floor = min(clamp01(d.Floor), n.ceiling)
			if d.Demand > 0 {
				n.demand = d.Demand
			}
			floors += n.floor
		}
	}
	capacity := max(0, 1-pins)

	// 3: floors.
	if floors > capacity {
		scale := capacity / floors
		res.FloorsScaled = true
		for i := range dc {
			dc[i].floor *= scale
		}
	}

	// 4: water-filling by demand. S(λ) = Σ clamp(λ, floor, want) rises from
	// Σ floor with slope equal to the number of DCs whose floor < λ < want.
	floors, wants, demands := 0.0, 0.0, 0.0
	for i := range dc {
		if n := &dc[i]; n.free {
			n.want = max(n.floor, min(n.demand, n.ceiling))
			floors += n.floor
			wants += n.want
			demands += max(n.floor, n.demand)
			res.Level = max(res.Level, n.want)
		}
	}
	res.Congested = demands > capacity
	filled := wants > capacity
	if filled {
		k := 0
		for _, n := range dc {
			if n.free && n.floor < n.want {
				ev[k] = event{n.floor, 1}
				ev[k+1] = event{n.want, -1}
				k += 2
			}
		}
		res.Level = solve(ev[:k], floors, capacity)
	}
	for i, n := range dc {
		if n.free {
			out[i] = max(n.floor, min(n.want, res.Level))
		}
	}

	// 5: headroom — equal up to EqualHeadroom, then by demand, then equal.
	if !filled && capacity > wants {
		left := capacity - wants
		used := spread(dc, out, ev, min(left, EqualHeadroom), false)
		used += spread(dc, out, ev, left-used, true)
		used += spread(dc, out, ev, left-used, false)
		res.Headroom = used
	}

	res.Sum = fitSum(dc, out, &res)
	return res
}

// spread hands out up to amount among the free DCs below their ceilings:
// each gets min(room, θ·weight) with θ chosen so that the parts sum to
// amount, the weight being the DC's demand (up to its ceiling) when
// byDemand and 1 otherwise. It returns what it handed out.
func spread(dc []norm, out []float64, ev []event, amount float64, byDemand bool) float64 {
	if !(amount > 0) {
		return 0
	}
	weight := func(n norm) float64 {
		if byDemand {
			return min(n.demand, n.ceiling)
		}
		return 1
	}
	k, room := 0, 0.0
	for i, n := range dc {
		if r, w := n.ceiling-out[i], weight(n); n.free && r > 0 && w > 0 {
			ev[k] = event{r / w, w}
			k++
			room += r
		}
	}
	if k == 0 {
		return 0
	}
	theta := math.Inf(1)
	if room > amount {
		theta = solveFill(ev[:k], amount)
	}
	used := 0.0
	for i, n := range dc {
		if r, w := n.ceiling-out[i], weight(n); n.free && r > 0 && w > 0 {
			if add := theta * w; add < r {
				out[i] += add
				used += add
			} else {
				out[i] = n.ceiling
				used += r
			}
		}
	}
	return used
}

// event is a breakpoint of a continuous, nondecreasing, piecewise-linear
// function: at x its slope changes by d.
type event struct{ x, d float64 }

// solve returns the x ≥ 0 at which the function that is v and flat at 0
// and changes slope by ±1 at the events reaches target. It sorts ev. When
// the function never reaches target it returns the last breakpoint.
func solve(ev []event, v, target float64) float64 {
	if v >= target {
		return 0
	}
	sortEvents(ev)
	x, slope := 0.0, 0.0
	for _, e := range ev {
		if e.x > x {
			next := v + slope*(e.x-x)
			if next >= target {
				return x + (target-v)/slope
			}
			v, x = next, e.x
		}
		slope += e.d
	}
	if slope > 0 {
		return x + (target-v)/slope
	}
	return x
}

// solveFill returns the θ at which Σ min(room_i, θ·w_i) reaches target,
// given one event per DC at x = room_i/w_i with d = w_i, and a target below
// Σ room_i. It sorts ev and overwrites the d fields. The slope of each
// segment, the weight of the DCs not yet full, is summed afresh from the
// right rather than by subtracting weights as they fill, which would lose
// all precision when a tiny weight remains beside large ones.
func solveFill(ev []event, target float64) float64 {
	sortEvents(ev)
	for j, acc := len(ev)-1, 0.0; j >= 0; j-- {
		acc += ev[j].d
		ev[j].d = acc
	}
	x, v := 0.0, 0.0
	for _, e := range ev {
		next := v + e.d*(e.x-x)
		if next >= target {
			return x + (target-v)/e.d
		}
		v, x = next, e.x
	}
	return x
}

// sortEvents sorts ev by x, which is never NaN.
func sortEvents(ev []event) {
	slices.SortFunc(ev, func(a, b event) int {
		switch {
		case a.x < b.x:
			return -1
		case a.x > b.x:
			return 1
		}
		return 0
	})
}

// fitSum returns the sum of out in index order after making sure it is at
// most 1. Rounding can leave the sum an ulp or a few above 1; the excess is
// taken from the largest share of a DC that is neither pinned nor drained
// (or, when there is none, from the largest pin, which sets PinsScaled), by
// at least one ulp of that share at a time.
func fitSum(dc []norm, out []float64, res *Result) float64 {
	sum := 0.0
	for _, s := range out {
		sum += s
	}
	for tries := 0; sum > 1; tries++ {
		if tries >= 8 {
			// Not seen in practice: shrink everything by a factor far
			// above the rounding error until the sum fits.
			for i := range out {
				out[i] *= 1 - 1e-12
			}
		} else {
			k := largest(dc, out, true)
			if k < 0 {
				k = largest(dc, out, false)
				res.PinsScaled = true
			}
			dec := max(sum-1, out[k]-math.Nextafter(out[k], 0))
			out[k] = max(0, out[k]-dec)
		}
		sum = 0
		for _, s := range out {
			sum += s
		}
	}
	return sum
}

// largest returns the index of the largest positive share, among the free
// DCs only when onlyFree, or -1.
func largest(dc []norm, out []float64, onlyFree bool) int {
	k := -1
	for i, s := range out {
		if s > 0 && (!onlyFree || dc[i].free) && (k < 0 || s > out[k]) {
			k = i
		}
	}
	return k
}

// Validate reports settings an operator should not be allowed to set: a
// demand, floor, ceiling or pin that is not a number in [0, 1] (a demand
// may exceed 1), a floor above a ceiling, pins summing above 1, pins and
// floors summing above 1, or two DCs with the same non-empty name. Allocate
// copes with all of these; Validate lets an admin API refuse them with a
// reason. Its errors wrap ErrInvalid.
func Validate(dcs []DC) error {
	pins, floors := 0.0, 0.0
	for i, d := range dcs {
		name := d.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i)
		}
		for _, f := range []struct {
			name  string
			v     float64
			upper float64
		}{
			{"demand", d.Demand, math.MaxFloat64},
			{"floor", d.Floor, 1},
			{"ceiling", d.Ceiling, 1},
			{"pin", d.Pin, 1},
		} {
			if !(f.v >= 0 && f.v <= f.upper) {
				return fmt.Errorf("%w: dc %s: %s %v is not in [0, %v]", ErrInvalid, name, f.name, f.v, f.upper)
			}
		}
		if d.Ceiling > 0 && d.Floor > d.Ceiling {
			return fmt.Errorf("%w: dc %s: floor %v is above ceiling %v", ErrInvalid, name, d.Floor, d.Ceiling)
		}
		if d.Name != "" && slices.ContainsFunc(dcs[:i], func(o DC) bool { return o.Name == d.Name }) {
			return fmt.Errorf("%w: dc %s appears twice", ErrInvalid, name)
		}
		switch {
		case d.Drained:
		case d.Pinned:
			pins += d.Pin
		default:
			floors += d.Floor
		}
	}
	if pins > 1 {
		return fmt.Errorf("%w: pins sum to %v, above 1", ErrInvalid, pins)
	}
	if pins+floors > 1 {
		return fmt.Errorf("%w: pins and floors sum to %v, above 1", ErrInvalid, pins+floors)
	}
	return nil
}
