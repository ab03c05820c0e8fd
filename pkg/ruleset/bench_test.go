package ruleset_test

import (
	"fmt"
	"testing"

	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

// benchSet returns n rules shaped like a real domain's: three defaults
// that see every request (per ip, per user on any admin path, and a
// global cap), and the rest split between rules per service path, with
// methods and ip or user keys, and Envoy-style rules that select a tenant
// by condition.
func benchSet(n int) rule.Set {
	s := rule.Set{Domain: "bench", Rules: []rule.Rule{
		limited("default-ip", keyType("ip"), overrides(rule.Override{CIDR: "10.0.0.0/8", Action: rule.ActionAllow})),
		limited("admin", path("/**/admin/**"), keyType("user")),
		limited("global"),
	}}
	for i := 3; i < n; i++ {
		id := fmt.Sprintf("r%d", i)
		switch {
		case i%5 == 0:
			s.Rules = append(s.Rules, limited(id, conds("tenant", fmt.Sprintf("t%d", i)), keyType("tenant", "user")))
		case i%2 == 0:
			s.Rules = append(s.Rules, limited(id, path(fmt.Sprintf("/svc%d/**", i/3)), methods("GET", "HEAD"), keyType("ip")))
		default:
			s.Rules = append(s.Rules, limited(id, path(fmt.Sprintf("/svc%d/items/*", i/3)), methods("POST"), keyType("user")))
		}
	}
	return s
}

func BenchmarkMatch(b *testing.B) {
	for _, n := range []int{10, 1000} {
		s, err := ruleset.Compile(benchSet(n))
		if err != nil {
			b.Fatal(err)
		}
		attrs := map[string]string{
			"path": "/svc2/items/42", "method": "GET", "ip": "192.0.2.7",
			"user": "u-1234", "tenant": "t5",
		}
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			dst := make([]ruleset.Match, 0, 16)
			b.ReportAllocs()
			for b.Loop() {
				dst = s.Match(attrs, dst[:0])
			}
			b.ReportMetric(float64(len(dst)), "matches/op")
		})
	}
}
