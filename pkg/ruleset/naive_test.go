package ruleset_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

// result is what a test compares of a Match.
type result struct {
	ID        string
	Key       string
	StoreKey  string
	Action    rule.Action
	Limit     int64
	Burst     int64
	Unlimited bool
	Oversized bool
}

func (r result) String() string {
	return fmt.Sprintf("%s key=%q store=%q %s limit=%d burst=%d unlimited=%t oversized=%t", r.ID, r.Key, r.StoreKey, r.Action, r.Limit, r.Burst, r.Unlimited, r.Oversized)
}

func results(ms []ruleset.Match) []result {
	if len(ms) == 0 {
		return nil
	}
	rs := make([]result, len(ms))
	for i, m := range ms {
		rs[i] = result{m.Rule.Spec.ID, m.Key, m.StoreKey, m.Action, m.Limit, m.Burst, m.Unlimited, m.Oversized}
	}
	return rs
}

// naiveMatch is the package's semantics written as plainly as possible:
// every rule is tried, every override is tried. s must have its defaults.
func naiveMatch(s rule.Set, attrs map[string]string) []result {
	var out []result
	for i := range s.Rules {
		r := &s.Rules[i]
		if !r.Enabled {
			continue
		}
		pm, err := rule.CompilePath(r.PathPattern)
		if err != nil || !pm.Match(attrs["path"]) {
			continue
		}
		if len(r.Methods) > 0 && !slices.Contains(r.Methods, attrs["method"]) {
			continue
		}
		ok := true
		for name, want := range r.Conditions {
			v := attrs[name]
			if name == rule.DimensionIP && want != "*" {
				v, want = naiveIP(v), naiveIP(want)
			}
			if v == "" || (want != "*" && v != want) {
				ok = false
			}
		}
		vals := make([]string, len(r.KeyType))
		for j, d := range r.KeyType {
			vals[j] = attrs[d]
			if vals[j] == "" {
				ok = false
			}
			if d == rule.DimensionIP {
				vals[j] = naiveIP(vals[j])
			}
		}
		if !ok {
			continue
		}
		key := naiveKey(vals)
		storeKey := s.Domain + "/" + r.ID + "/" + key
		if len(storeKey) > algorithm.MaxKeyLen {
			out = append(out, result{ID: r.ID, Oversized: true})
			continue
		}
		res := result{ID: r.ID, Key: key, StoreKey: storeKey, Action: rule.ActionLimit, Limit: r.Limit, Burst: r.Burst, Unlimited: r.Unlimited}
		if o := naiveOverride(r, vals); o != nil {
			res.Action = o.Action
			if o.Action == rule.ActionLimit {
				res.Limit, res.Burst = o.Limit, o.Burst
			}
		}
		out = append(out, res)
	}
	return out
}

func naiveIP(v string) string {
	if a, err := netip.ParseAddr(v); err == nil {
		return a.Unmap().WithZone("").String()
	}
	return v
}

func naiveKey(vals []string) string {
	if len(vals) == 1 {
		return vals[0]
	}
	esc := make([]string, len(vals))
	for i, v := range vals {
		v = strings.ReplaceAll(v, `\`, `\\`)
		esc[i] = strings.ReplaceAll(v, `|`, `\|`)
	}
	return strings.Join(esc, "|")
}

// naiveOverride returns the most specific override of r that selects the
// key with the values vals, trying them all.
func naiveOverride(r *rule.Rule, vals []string) *rule.Override {
	val := func(dim string) string { return vals[slices.Index(r.KeyType, dim)] }
	var best *rule.Override
	var bestExact bool
	var bestSize int
	for i := range r.Overrides {
		o := &r.Overrides[i]
		var exact bool
		var size int
		switch {
		case o.Key != "":
			want := o.Key
			if r.KeyType[0] == rule.DimensionIP {
				want = naiveIP(want)
			}
			if vals[0] != want {
				continue
			}
			exact, size = true, 1
		case len(o.Match) > 0:
			all := true
			for d, want := range o.Match {
				if d == rule.DimensionIP {
					want = naiveIP(want)
				}
				if val(d) != want {
					all = false
				}
			}
			if !all {
				continue
			}
			exact, size = true, len(o.Match)
		default:
			p := netip.MustParsePrefix(o.CIDR)
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			a, err := netip.ParseAddr(val(rule.DimensionIP))
			if err != nil || !p.Contains(a.Unmap().WithZone("")) {
				continue
			}
			size = p.Bits()
		}
		// Earlier overrides win ties, so only a strictly better one
		// replaces the best so far.
		better := best == nil ||
			(exact && !bestExact) ||
			(exact == bestExact && size > bestSize)
		if better {
			best, bestExact, bestSize = o, exact, size
		}
	}
	return best
}
