package rule

import (
	"math"
	"math/bits"
	"slices"

	"github.com/weirhq/weir/pkg/allocate"
)

// CheckDC reports whether name is a valid DC name: 1 to 64 characters of
// lower-case letters, digits and '-', starting with a letter or digit. Its
// error is a *ValidationError.
func CheckDC(name string) error {
	var rep Report
	checkDC(&rep, "dc", name)
	return rep.Err()
}

// StaticShare returns dc's safe static share of r's limit, among the DCs
// dcs (dc counts as one of them whether listed or not). A local rule's is 1.
// For a global rule, a DC named in Shares gets its share (all of them scaled
// down in proportion when they sum above 1), and the DCs not named split
// what the named ones leave in equal parts; with no Shares every DC gets
// 1/N. The static shares of the DCs of one list sum to at most 1 exactly,
// as float64 added in any order, so that their local limits — each
// floor(share × limit) — never sum above the limit.
func (r *Rule) StaticShare(dc string, dcs []string) float64 {
	if r.Scope == ScopeLocal {
		return 1
	}
	sum := r.sharesSum()
	if v, ok := r.Shares[dc]; ok {
		if v <= 0 || math.IsNaN(v) {
			return 0
		}
		if sum > 1 {
			v /= sum
		}
		return shrink(min(v, 1), len(r.Shares))
	}
	unlisted := 0
	for _, d := range dcs {
		if _, ok := r.Shares[d]; !ok && d != dc {
			unlisted++
		}
	}
	unlisted++ // dc itself, listed or not
	// A DC listed twice in dcs counts twice: harmless, it only lowers the
	// shares.
	rest := 1 - min(sum, 1)
	if rest <= 0 {
		return 0
	}
	return shrink(rest/float64(unlisted), len(r.Shares)+unlisted)
}

// shrink lowers a share by n units in the last place, so that n shares
// computed by division never sum above 1 through rounding.
func shrink(v float64, n int) float64 {
	for range n {
		v = math.Nextafter(v, 0)
	}
	return max(v, 0)
}

// StaticLimit returns dc's safe static local limit of a global limit
// `limit` of r, among the DCs dcs (dc counts as one of them whether listed
// or not; a name listed twice counts once): the DCs' static shares
// apportioned in integers (allocate.Apportion) over the DCs in name order,
// so that the static limits of the DCs of one list sum to at most limit —
// exactly limit when the static shares sum to 1 — and every DC computes
// the same split whatever the order of its list. A local rule's is limit.
func (r *Rule) StaticLimit(dc string, dcs []string, limit int64) int64 {
	if r.Scope == ScopeLocal || limit <= 0 {
		return max(limit, 0)
	}
	var nameBuf [allocate.MaxStackDCs]string
	names := append(nameBuf[:0], dcs...)
	names = append(names, dc)
	slices.Sort(names)
	names = slices.Compact(names)
	n := len(names)
	var shareBuf [allocate.MaxStackDCs]float64
	var outBuf [allocate.MaxStackDCs]int64
	shares := shareBuf[:0]
	var out []int64
	if n > allocate.MaxStackDCs {
		out = make([]int64, n)
	} else {
		out = outBuf[:n]
	}
	self := 0
	for i, name := range names {
		shares = append(shares, r.StaticShare(name, names))
		if name == dc {
			self = i
		}
	}
	allocate.Apportion(shares, limit, out)
	return out[self]
}

// sharesSum returns the sum of r's positive Shares, added in increasing
// order so that it does not depend on the map's iteration order: every DC
// computes the same static shares to the last bit.
func (r *Rule) sharesSum() float64 {
	var buf [allocate.MaxStackDCs]float64
	vs := buf[:0]
	for _, v := range r.Shares {
		if v > 0 && !math.IsNaN(v) {
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	sum := 0.0
	for _, v := range vs {
		sum += v
	}
	return sum
}

// LocalLimit returns the local limit a DC enforces of a global limit
// `limit`, given its assignment: local (its integer limit) out of global
// (the limit the coordinator apportioned), or, for an assignment without
// integer limits (global 0, as written before they existed),
// floor(share × limit). When limit differs from global — the rule was
// edited since, or an override's limit applies to a key — local is scaled
// to it and rounded down, so the DCs' local limits still sum to at most
// limit. The result is in [0, limit].
func LocalLimit(local, global int64, share float64, limit int64) int64 {
	switch {
	case limit <= 0:
		return 0
	case global <= 0:
		if !(share > 0) {
			return 0
		}
		if share >= 1 {
			return limit
		}
		return min(limit, int64(math.Floor(float64(limit)*share)))
	case local <= 0:
		return 0
	case local >= global:
		return limit
	case global == limit:
		return local
	}
	hi, lo := bits.Mul64(uint64(local), uint64(limit))
	q, _ := bits.Div64(hi, lo, uint64(global))
	return int64(q)
}
