package ruleset

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/weirhq/weir/pkg/rule"
)

// override is one compiled rule.Override.
type override struct {
	pos    int // in rule.Rule.Overrides: the tie-breaker
	action rule.Action
	limit  int64
	burst  int64
}

// exactGroup holds the Key and Match overrides that name the same
// dimensions, by the key of their values (appendKey of the values in
// key_type order).
type exactGroup struct {
	dims  []int // indices into the rule's key dimensions, ascending
	byKey map[string]*override
}

// cidrGroup holds the CIDR overrides of one prefix length, by prefix.
type cidrGroup struct {
	bits     int
	byPrefix map[netip.Prefix]*override
}

// overrides are a rule's overrides, arranged so that the most specific one
// that selects a key is found with a few map lookups.
type overrides struct {
	exact []exactGroup // most dimensions first
	cidr  []cidrGroup  // longest prefix first
}

// compileOverrides compiles the overrides of spec, which is valid; ipDim
// is the index of the "ip" dimension in spec.KeyType, or -1.
func compileOverrides(spec *rule.Rule, ipDim int) (overrides, error) {
	var ov overrides
	exact := map[uint32]*exactGroup{} // by the dims, as a bit set
	cidr := map[int]*cidrGroup{}
	for i := range spec.Overrides {
		o := &spec.Overrides[i]
		c := &override{pos: i, action: o.Action, limit: o.Limit, burst: o.Burst}
		switch {
		case o.CIDR != "":
			p, err := netip.ParsePrefix(o.CIDR)
			if err != nil {
				return overrides{}, fmt.Errorf("overrides[%d].cidr: %w", i, err)
			}
			// Requests' addresses are unmapped, so an IPv4-mapped prefix
			// is the IPv4 prefix it maps.
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			g := cidr[p.Bits()]
			if g == nil {
				g = &cidrGroup{bits: p.Bits(), byPrefix: map[netip.Prefix]*override{}}
				cidr[p.Bits()] = g
			}
			if _, dup := g.byPrefix[p]; !dup { // the first listed wins
				g.byPrefix[p] = c
			}
		default:
			sel := o.Match
			if o.Key != "" {
				sel = map[string]string{spec.KeyType[0]: o.Key}
			}
			var dims []int
			var vals []string
			var set uint32
			for d, name := range spec.KeyType {
				v, ok := sel[name]
				if !ok {
					continue
				}
				if d == ipDim {
					v = parseIP(v).canon
				}
				dims = append(dims, d)
				vals = append(vals, v)
				set |= 1 << d
			}
			if len(dims) != len(sel) {
				return overrides{}, fmt.Errorf("overrides[%d]: selects dimensions the rule does not have", i)
			}
			g := exact[set]
			if g == nil {
				g = &exactGroup{dims: dims, byKey: map[string]*override{}}
				exact[set] = g
			}
			k := string(appendKey(nil, vals))
			if _, dup := g.byKey[k]; !dup {
				g.byKey[k] = c
			}
		}
	}
	for _, g := range exact {
		ov.exact = append(ov.exact, *g)
	}
	// Most dimensions first; the order among groups of the same size does
	// not matter (find compares positions), but keep it stable.
	slices.SortFunc(ov.exact, func(a, b exactGroup) int {
		if c := cmp.Compare(len(b.dims), len(a.dims)); c != 0 {
			return c
		}
		return slices.Compare(a.dims, b.dims)
	})
	for _, bits := range slices.Sorted(maps.Keys(cidr)) {
		ov.cidr = append(ov.cidr, *cidr[bits])
	}
	slices.Reverse(ov.cidr)
	return ov, nil
}

// find returns the override that selects the key whose dimension values
// are vals, whose key (appendKey of vals) is key and whose "ip" dimension
// is ip (nil if the rule has none); nil if none does.
func (ov *overrides) find(vals []string, key string, ip *parsedIP) *override {
	var best *override
	bestDims := 0
	for i := range ov.exact {
		g := &ov.exact[i]
		if best != nil && len(g.dims) < bestDims {
			break
		}
		var o *override
		switch {
		case len(g.dims) == len(vals):
			o = g.byKey[key]
		case len(g.dims) == 1:
			o = g.byKey[vals[g.dims[0]]]
		default:
			var buf [256]byte
			var sel [maxDims]string
			for j, d := range g.dims {
				sel[j] = vals[d]
			}
			b := appendKey(buf[:0], sel[:len(g.dims)])
			o = g.byKey[string(b)]
		}
		if o != nil && (best == nil || o.pos < best.pos) {
			best, bestDims = o, len(g.dims)
		}
	}
	if best != nil || ip == nil || !ip.addr.IsValid() {
		return best
	}
	for i := range ov.cidr {
		g := &ov.cidr[i]
		if g.bits > ip.addr.BitLen() {
			continue
		}
		p, err := ip.addr.Prefix(g.bits)
		if err != nil {
			continue
		}
		if o := g.byPrefix[p]; o != nil {
			return o
		}
	}
	return nil
}
