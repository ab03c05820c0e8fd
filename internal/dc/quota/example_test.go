package quota_test

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/internal/dc/quota"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

func ExampleTable() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	t, _ := quota.New(quota.Config{DC: "eu", DCs: []string{"eu", "us"}, Now: clock})
	r := &ruleset.Rule{Spec: rule.Rule{ID: "per-user", Domain: "api", Scope: rule.ScopeGlobal,
		Shares: map[string]float64{"eu": 0.5, "us": 0.5}}}

	// The first list of the DC's documents: a lease for 10 s and the
	// rule's assignment, with one key of its own.
	t.Reset(7, []quota.Change{
		{Revision: 5, Lease: &quota.Lease{DC: "eu", Epoch: 3, ValidUntil: now.Add(time.Minute), TTL: 10 * time.Second}},
		{Domain: "api", RuleID: "per-user", Revision: 6, Assignment: &quota.Assignment{
			DC: "eu", Domain: "api", RuleID: "per-user", Epoch: 3, Share: 0.8,
			Keys: []quota.KeyShare{{Key: "alice", Share: 0.95}},
		}},
	})
	fmt.Println(t.Share("api", r, "bob"), t.Share("api", r, "alice"))

	// Nothing heard for 10 s: back to min(static, assigned).
	now = now.Add(10 * time.Second)
	fmt.Printf("%.2f %.2f\n", t.Share("api", r, "bob"), t.Share("api", r, "alice"))
	fmt.Println(t.Applied())
	// Output:
	// 0.8 0.95
	// 0.50 0.50
	// 3 7
}
