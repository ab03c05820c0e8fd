package adminclient_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/weirhq/weir/internal/testkit/adminclienttest"
	"github.com/weirhq/weir/pkg/adminclient"
	"github.com/weirhq/weir/pkg/rule"
)

// Read a rule with its ETag and change its limit only if nobody changed
// the rule meanwhile.
func Example() {
	srv := adminclienttest.Start(nil, "eu", "us") // in memory, in place of a coordinator
	defer srv.Close()
	ctx := context.Background()

	c, err := adminclient.New(srv.URL, adminclienttest.AdminToken, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	shop := c.WithDomain("shop")
	r, _ := rule.ParseRule([]byte(`{"rule_id": "login", "key_type": "username", "limit": 5, "window_seconds": 300}`))
	if _, err := shop.CreateRule(ctx, r); err != nil {
		fmt.Println(err)
		return
	}

	_, etag, err := shop.GetRule(ctx, "login")
	if err != nil {
		fmt.Println(err)
		return
	}
	updated, err := shop.UpdateRule(ctx, "login", map[string]any{"limit": 10}, etag)
	fmt.Println(updated.Limit, err)

	// The ETag is stale now: the update is refused.
	_, err = shop.UpdateRule(ctx, "login", map[string]any{"limit": 20}, etag)
	fmt.Println(errors.Is(err, adminclient.ErrPrecondition))
	fmt.Println(err)
	// Output:
	// 10 <nil>
	// true
	// update rule "login": rule "login" changed since "1" (now "2") (HTTP 412)
}
