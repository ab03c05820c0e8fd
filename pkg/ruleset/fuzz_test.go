package ruleset_test

import (
	"math/rand/v2"
	"testing"

	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

// fuzzSet is a fixed set of rules that together use every feature Match
// has: path anchors, condition anchors, methods, composite keys with ip,
// every kind of override, unlimited and disabled rules.
func fuzzSet() rule.Set {
	s := rule.Set{Domain: "fuzz", Rules: []rule.Rule{
		limited("all"),
		limited("api-ip", path("/api/**"), keyType("ip"), overrides(
			rule.Override{CIDR: "10.0.0.0/8", Action: rule.ActionAllow},
			rule.Override{CIDR: "10.1.0.0/16", Action: rule.ActionDeny},
			rule.Override{CIDR: "2001:db8::/32", Limit: 5},
			rule.Override{CIDR: "::ffff:192.0.2.0/120", Action: rule.ActionDeny},
			rule.Override{Key: "10.1.2.3", Limit: 1000},
			rule.Override{Key: "2001:db8::1", Action: rule.ActionAllow},
		)),
		limited("users-get", path("/api/users/*"), methods("GET", "HEAD"), keyType("user", "ip"), overrides(
			rule.Override{Match: map[string]string{"user": "u|1"}, Limit: 3},
			rule.Override{Match: map[string]string{"user": "u|1", "ip": "10.0.0.1"}, Action: rule.ActionDeny},
			rule.Override{CIDR: "0.0.0.0/0", Action: rule.ActionAllow},
		)),
		limited("plan", conds("plan", "free", "tenant", "*"), keyType("tenant", "user", "x"), overrides(
			rule.Override{Match: map[string]string{"tenant": `a\`}, Action: rule.ActionAllow},
			rule.Override{Match: map[string]string{"user": "b"}, Action: rule.ActionDeny},
			rule.Override{Match: map[string]string{"tenant": `a\`, "x": "1"}, Limit: 9},
		)),
		limited("files", path("/files/*.json"), methods("POST")),
		limited("deep", path("/**/admin/**"), keyType("user")),
		limited("root", path("/")),
		limited("counting", conds("x", "1"), keyType("ip"), unlimited, overrides(rule.Override{CIDR: "::/0", Action: rule.ActionDeny})),
		limited("off", path("/api/**"), disabled),
		limited("method-cond", conds("method", "DELETE")),
	}}
	for i := range s.Rules {
		s.Rules[i].SetDefaults()
	}
	return s
}

// FuzzMatch matches random requests against fuzzSet: Match must not
// panic, must agree with the naive loop, and its keys must go back
// through KeyFor.
func FuzzMatch(f *testing.F) {
	f.Add("/api/users/42", "GET", "10.1.2.3", "u|1", "free", "acme", "1", uint8(0))
	f.Add("/api/x", "POST", "2001:DB8::1", "", "", "", "", uint8(0))
	f.Add("//api//users//7/", "HEAD", "::ffff:10.0.0.1", `a\b`, "free", `a\`, "1", uint8(0))
	f.Add("/files/x.json", "POST", "", "b", "free", "t", "2", uint8(0xff))
	f.Add("/a/admin/b", "get", "fe80::1%eth0", "u", "", "", "1", uint8(0x0f))
	f.Add("", "", "garbage", "", "", "", "", uint8(0))
	spec := fuzzSet()
	s, err := ruleset.Compile(spec)
	if err != nil {
		f.Fatalf("Compile: %v", err)
	}
	f.Fuzz(func(t *testing.T, path, method, ip, user, plan, tenant, x string, absent uint8) {
		attrs := map[string]string{}
		// Each bit of absent leaves an attribute out rather than
		// passing its (possibly empty) value.
		for i, kv := range [][2]string{{"path", path}, {"method", method}, {"ip", ip}, {"user", user}, {"plan", plan}, {"tenant", tenant}, {"x", x}} {
			if absent&(1<<i) == 0 {
				attrs[kv[0]] = kv[1]
			}
		}
		checkAgainstNaive(t, s, spec, attrs)
	})
}

// TestFuzzSetRandomRequests runs FuzzMatch's check on random requests
// from the property test's vocabulary, which meets fuzzSet's rules more
// often than random bytes do.
func TestFuzzSetRandomRequests(t *testing.T) {
	spec := fuzzSet()
	s, err := ruleset.Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		a := randomAttrs(rnd)
		a["plan"] = pick(rnd, []string{"", "free", "pro"})
		a["tenant"] = pick(rnd, []string{"", "t", `a\`})
		a["path"] = pick(rnd, []string{"/api/users/1", "/api", "/files/a.json", "/x/admin", "/", a["path"]})
		checkAgainstNaive(t, s, spec, a)
	}
}
