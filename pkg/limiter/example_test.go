package limiter_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
	"github.com/weirhq/weir/pkg/store/memstore"
)

// A limiter embedded in a Go service: five logins per user per five
// minutes, decided in memory, with the clock held still so that the output
// is the same on every run.
func ExampleLimiter_Check() {
	store, err := memstore.New(memstore.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	l, err := limiter.New(limiter.Config{DC: "local", Store: store, Now: func() time.Time { return now }})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	rules, err := ruleset.Compile(rule.Set{Domain: "auth", Rules: []rule.Rule{{
		ID: "login", KeyType: rule.Dimensions{"username"}, Limit: 5, WindowSeconds: 300,
		Algorithm: algorithm.FixedWindow, Scope: rule.ScopeLocal, Enabled: true,
	}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := l.SetRules(rules); err != nil {
		fmt.Println(err)
		return
	}

	req := limiter.Request{Domain: "auth", Items: []limiter.Item{{Attributes: map[string]string{"username": "ann"}}}}
	for attempt := 1; attempt <= 6; attempt++ {
		resp, err := l.Check(context.Background(), req)
		if err != nil {
			fmt.Println(err)
			return
		}
		it := resp.Items[0]
		r := it.Results[it.Decisive]
		fmt.Printf("attempt %d: allowed=%v remaining=%d retry after %v\n", attempt, resp.Allowed, r.Remaining, r.RetryAfter)
	}
	// Output:
	// attempt 1: allowed=true remaining=4 retry after 0s
	// attempt 2: allowed=true remaining=3 retry after 0s
	// attempt 3: allowed=true remaining=2 retry after 0s
	// attempt 4: allowed=true remaining=1 retry after 0s
	// attempt 5: allowed=true remaining=0 retry after 0s
	// attempt 6: allowed=false remaining=0 retry after 5m0s
}
