package ruleset_test

import (
	"fmt"

	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

func ExampleSet_Match() {
	s, err := ruleset.Compile(rule.Set{Domain: "shop", Rules: []rule.Rule{
		{ID: "per-ip", PathPattern: "/api/**", KeyType: rule.Dimensions{"ip"}, Limit: 100, WindowSeconds: 60, Enabled: true,
			Overrides: []rule.Override{{CIDR: "10.0.0.0/8", Action: rule.ActionAllow}}},
		{ID: "tenant-user", KeyType: rule.Dimensions{"tenant", "user_id"}, Limit: 1000, WindowSeconds: 86400, Enabled: true,
			Overrides: []rule.Override{{Match: map[string]string{"tenant": "acme"}, Limit: 5000}}},
		{ID: "login", PathPattern: "/auth/login", Methods: []string{"POST"}, KeyType: rule.Dimensions{"username"}, Limit: 5, WindowSeconds: 300, Enabled: true},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, attrs := range []map[string]string{
		{"path": "/api/orders", "method": "GET", "ip": "2001:DB8::7", "tenant": "acme", "user_id": "42"},
		{"path": "/api/orders", "method": "GET", "ip": "10.1.2.3"},
		{"path": "/auth/login", "method": "POST", "username": "ann"},
	} {
		for _, m := range s.Match(attrs, nil) {
			fmt.Println(m.StoreKey, m.Action, m.Limit)
		}
	}
	// Output:
	// shop/per-ip/2001:db8::7 limit 100
	// shop/tenant-user/acme|42 limit 5000
	// shop/per-ip/10.1.2.3 allow 100
	// shop/login/ann limit 5
}

func ExampleRule_KeyFor() {
	s, err := ruleset.Compile(rule.Set{Domain: "shop", Rules: []rule.Rule{
		{ID: "tenant-user", KeyType: rule.Dimensions{"tenant", "user_id"}, Limit: 1000, WindowSeconds: 86400, Enabled: true},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, _ := s.Rule("tenant-user")
	m, err := r.KeyFor(`a\|b|42`) // tenant "a|b", user_id "42"
	fmt.Println(m.StoreKey, err)
	_, err = r.KeyFor("acme")
	fmt.Println(err)
	// Output:
	// shop/tenant-user/a\|b|42 <nil>
	// ruleset: invalid key: rule "tenant-user" takes 2 values (tenant, user_id) joined by "|", with "|" and "\" in a value escaped by "\"; got "acme"
}
