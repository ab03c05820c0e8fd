package grpcapi_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/weirhq/weir/internal/testkit/grpctest"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// poolRules count every request by user, and a VIP's under a second rule
// too: an attribute left over from another call would add a rule.
const poolRules = `
domain: api
rules:
  - rule_id: user
    conditions: {kind: user}
    key_type: user_id
    limit: 1000000
    window_seconds: 60
  - rule_id: vip
    conditions: {vip: "yes"}
    key_type: user_id
    limit: 1000000
    window_seconds: 60
`

// Concurrent calls through the server's pooled decoders each get the
// answer of their own items: the rules their own attributes match, under
// their own keys, whatever the calls before them on the same decoder held
// (more items, other attributes, another domain).
func TestPooledDecodersKeepCallsApart(t *testing.T) {
	client, c := weirv1.NewLimiterClient(serve(t, poolRules)), ctx(t)
	grpctest.Callers(t, 8, 150, func(g, n int) error {
		if n%37 == 0 { // now and then a call of another domain
			if _, err := client.Check(c, &weirv1.CheckRequest{Domain: "nowhere", Items: []*weirv1.CheckItem{item(1, "kind", "user", "user_id", "x", "vip", "yes")}}); err == nil {
				return errors.New("an unknown domain was answered")
			}
		}
		items := 1 + (g+n)%18 // past the 16 items whose maps are kept
		req := &weirv1.CheckRequest{Domain: "api"}
		want := make([][]string, items)
		for i := range items {
			user := fmt.Sprintf("u%d-%d-%d", g, n, i)
			kv := []string{"kind", "user", "user_id", user}
			want[i] = []string{"user"}
			if (g*7+n*3+i)%4 == 0 {
				kv = append(kv, "vip", "yes", "extra"+fmt.Sprint(i), "x")
				want[i] = append(want[i], "vip")
			}
			req.Items = append(req.Items, item(1, kv...))
		}
		resp, err := client.Check(c, req)
		if err != nil {
			return err
		}
		if len(resp.GetItems()) != items {
			return fmt.Errorf("%d items answered, want %d", len(resp.GetItems()), items)
		}
		for i, it := range resp.GetItems() {
			var rules []string
			for _, r := range it.GetResults() {
				rules = append(rules, r.GetRuleId())
				if want := req.Items[i].Attributes["user_id"]; r.GetKey() != want {
					return fmt.Errorf("item %d: rule %s counted key %q, want %q", i, r.GetRuleId(), r.GetKey(), want)
				}
			}
			if slices.Sort(rules); !slices.Equal(rules, want[i]) {
				return fmt.Errorf("item %d: rules %v, want %v", i, rules, want[i])
			}
		}
		return nil
	})
}
