package ruleset_test

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

// Vocabularies for random rules and requests, small so that they meet.
var (
	genPaths    = []string{"", "/", "/a", "/a/*", "/a/**", "/b", "/b/c", "/**/c", "/a*", "/*/b", "/**", "/b/**", "/c/d*"}
	genMethods  = []string{"GET", "POST", "DELETE"}
	genCondKeys = []string{"x", "y", "ip", "c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "method"}
	genDims     = []string{"ip", "user", "x"}
	genValues   = map[string][]string{
		"ip":   {"10.1.2.3", "10.2.0.1", "2001:db8::1", "192.0.2.1", "::ffff:10.1.2.3", "10.1.2.4"},
		"user": {"u1", "u|2", `a\b`, "u"},
		"x":    {"1", "2"},
	}
	genCIDRs = []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.2.3/32", "2001:db8::/32", "::/0", "0.0.0.0/0", "::ffff:10.0.0.0/104"}

	reqPaths   = []string{"", "/", "/a", "/a/x", "/a/x/c", "/b", "/b/c", "//a//", "a", "/ab", "/c", "/c/d1", "/x/b"}
	reqMethods = []string{"", "GET", "POST", "get", "PUT", "DELETE"}
	reqValues  = map[string][]string{
		"ip":   {"", "10.1.2.3", "10.1.9.9", "2001:DB8::1", "::ffff:10.1.2.3", "fe80::1%eth0", "garbage", "192.0.2.1", "10.1.2.4"},
		"user": {"", "u1", "u|2", `a\b`, "u", "v"},
		"x":    {"", "1", "2", "3"},
		"y":    {"", "1", "2"},
	}
)

func pick[T any](rnd *rand.Rand, xs []T) T { return xs[rnd.IntN(len(xs))] }

// randomRule returns a random valid rule.
func randomRule(rnd *rand.Rand, id string) rule.Rule {
	for {
		r := rule.Rule{ID: id, Limit: int64(1 + rnd.IntN(100)), WindowSeconds: 60, Enabled: rnd.IntN(8) != 0}
		if rnd.IntN(3) != 0 {
			r.PathPattern = pick(rnd, genPaths)
		}
		for _, m := range genMethods {
			if rnd.IntN(4) == 0 {
				r.Methods = append(r.Methods, m)
			}
		}
		for n := rnd.IntN(3); n > 0; n-- {
			if r.Conditions == nil {
				r.Conditions = map[string]string{}
			}
			k := pick(rnd, genCondKeys)
			switch {
			case k == "method":
				r.Conditions[k] = pick(rnd, genMethods)
			case k == "ip":
				r.Conditions[k] = pick(rnd, []string{"10.1.2.3", "2001:DB8::1", "::ffff:10.1.2.3", "garbage", "*"})
			case rnd.IntN(4) == 0:
				r.Conditions[k] = "*"
			default:
				r.Conditions[k] = pick(rnd, []string{"1", "2"})
			}
		}
		for _, i := range rnd.Perm(len(genDims))[:rnd.IntN(len(genDims)+1)] {
			r.KeyType = append(r.KeyType, genDims[i])
		}
		if rnd.IntN(6) == 0 {
			r.Unlimited, r.Limit, r.WindowSeconds = true, 0, 0
		}
		if len(r.KeyType) > 0 {
			for n := rnd.IntN(6); n > 0; n-- {
				r.Overrides = append(r.Overrides, randomOverride(rnd, &r))
			}
		}
		r.SetDefaults()
		// Drop the overrides that make the rule invalid (repeated
		// selectors, a CIDR without ip), one at a time.
		for r.Validate() != nil && len(r.Overrides) > 0 {
			r.Overrides = r.Overrides[:len(r.Overrides)-1]
		}
		if r.Validate() == nil {
			return r
		}
	}
}

func randomOverride(rnd *rand.Rand, r *rule.Rule) rule.Override {
	var o rule.Override
	switch rnd.IntN(3) {
	case 0:
		if len(r.KeyType) == 1 {
			o.Key = pick(rnd, genValues[r.KeyType[0]])
			break
		}
		fallthrough
	case 1:
		o.Match = map[string]string{}
		for _, d := range r.KeyType {
			if rnd.IntN(2) == 0 || len(o.Match) == 0 {
				o.Match[d] = pick(rnd, genValues[d])
			}
		}
	default:
		o.CIDR = pick(rnd, genCIDRs)
	}
	switch a := rnd.IntN(3); {
	case a == 0 && !r.Unlimited:
		o.Limit = int64(1 + rnd.IntN(1000))
	case a <= 1:
		o.Action = rule.ActionAllow
	default:
		o.Action = rule.ActionDeny
	}
	return o
}

func randomAttrs(rnd *rand.Rand) map[string]string {
	a := map[string]string{}
	if rnd.IntN(5) != 0 {
		a["path"] = pick(rnd, reqPaths)
	}
	if rnd.IntN(5) != 0 {
		a["method"] = pick(rnd, reqMethods)
	}
	for k, vs := range reqValues {
		if rnd.IntN(4) != 0 {
			a[k] = pick(rnd, vs)
		}
	}
	for _, k := range genCondKeys[3:13] {
		if rnd.IntN(3) == 0 {
			a[k] = pick(rnd, []string{"1", "2", ""})
		}
	}
	return a
}

func randomSet(rnd *rand.Rand, n int) rule.Set {
	s := rule.Set{Domain: "d"}
	for i := range n {
		s.Rules = append(s.Rules, randomRule(rnd, "r"+string(rune('a'+i%26))+string(rune('a'+i/26))))
	}
	return s
}

// checkAgainstNaive matches attrs with s and with a plain loop over spec,
// and fails t if they differ or a match's key does not give the same
// match back through KeyFor.
func checkAgainstNaive(t *testing.T, s *ruleset.Set, spec rule.Set, attrs map[string]string) {
	t.Helper()
	ms := s.Match(attrs, nil)
	got := results(ms)
	want := naiveMatch(spec, attrs)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("attrs %q:\ngot  %v\nwant %v", attrs, got, want)
	}
	for _, m := range ms {
		if m.Oversized {
			continue // no key to look up
		}
		back, err := m.Rule.KeyFor(m.Key)
		if err != nil {
			t.Fatalf("attrs %q: KeyFor(%q) of rule %s: got error %v, want none", attrs, m.Key, m.Rule.Spec.ID, err)
		}
		if back != m {
			t.Fatalf("attrs %q: KeyFor(%q) of rule %s: got %+v, want %+v", attrs, m.Key, m.Rule.Spec.ID, back, m)
		}
	}
}

// TestMatchAgreesWithNaive checks the indexed Match against a loop over
// every rule and override, for random rule sets and requests.
func TestMatchAgreesWithNaive(t *testing.T) {
	sets, reqs := 300, 200
	if testing.Short() {
		sets = 30
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range sets {
		spec := randomSet(rnd, 1+rnd.IntN(60))
		s, err := ruleset.Compile(spec)
		if err != nil {
			t.Fatalf("set %d: Compile: got error %v, want none", i, err)
		}
		for range reqs {
			checkAgainstNaive(t, s, spec, randomAttrs(rnd))
		}
	}
}
