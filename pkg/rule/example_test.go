package rule_test

import (
	"fmt"

	"github.com/weirhq/weir/pkg/rule"
)

func ExampleParseRule() {
	r, err := rule.ParseRule([]byte(`{"rule_id":"user-login-attempt","path_pattern":"/auth/login","key_type":"username","limit":5,"window_seconds":300,"algorithm":"SlidingWindowLog","enabled":true}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.ID, r.KeyType, r.Limit, r.Window(), r.Algorithm, r.Scope, r.FailureMode)
	// Output: user-login-attempt [username] 5 5m0s SlidingWindowLog global local
}

func ExampleParseSet_errors() {
	_, err := rule.ParseSet([]byte(`{
	  "domain": "shop",
	  "rules": [
	    {"rule_id": "per-ip", "key_type": "ip", "limit": "100", "window_seconds": 60,
	     "overrides": [{"cidr": "10.0.0/8", "action": "allow"}]},
	    {"rule_id": "per-ip", "limt": 5, "window_seconds": 60}
	  ]}`))
	fmt.Println(err)
	// Output:
	// rules[0].limit: want an integer, got "100"
	// rules[0].overrides[0].cidr: "10.0.0/8" is not a CIDR prefix (want e.g. 10.0.0.0/8 or 2001:db8::/32)
	// rules[1].limit: required, from 1 to 1000000000000
	// rules[1].limt: unknown field
	// rules[1].rule_id: "per-ip" is also the id of rules[0]
}

func ExampleCompilePath() {
	m, err := rule.CompilePath("/api/v1/**")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range []string{"/api/v1", "/api/v1/users/42", "/api/v2/users"} {
		fmt.Println(p, m.Match(p))
	}
	// Output:
	// /api/v1 true
	// /api/v1/users/42 true
	// /api/v2/users false
}
