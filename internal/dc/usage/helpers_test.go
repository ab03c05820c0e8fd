package usage_test

import (
	"testing"
	"time"

	"github.com/weirhq/weir/internal/dc/usage"
	"github.com/weirhq/weir/internal/testkit/rulesettest"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/ruleset"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

const rulesYAML = `
domain: shop
rules:
  - rule_id: per-user
    key_type: user_id
    limit: 100
    window_seconds: 1
    overrides:
      - key: vip
        limit: 1000
      - key: blocked
        action: deny
      - key: friend
        action: allow
  - rule_id: site
    limit: 1000
    window_seconds: 1
  - rule_id: per-ip-local
    scope: local
    key_type: ip
    limit: 10
    window_seconds: 1
  - rule_id: shadow-user
    shadow: true
    key_type: user_id
    limit: 10
    window_seconds: 1
  - rule_id: free
    unlimited: true
    key_type: user_id
`

func compile(t testing.TB) *ruleset.Set {
	t.Helper()
	return rulesettest.Compile(t, rulesYAML)
}

// dec is one rule's decision, for building responses.
type dec struct {
	rule      string
	key       string
	source    limiter.Source
	allowed   bool
	remaining int64
	limit     int64 // the local limit in force; 0: 100
	hits      int64 // 0: 1
}

// result builds the limiter's result for d under set.
func result(t testing.TB, set *ruleset.Set, d dec) limiter.RuleResult {
	t.Helper()
	r, ok := set.Rule(d.rule)
	if !ok {
		t.Fatalf("no rule %q", d.rule)
	}
	m, err := r.KeyFor(d.key)
	if err != nil {
		t.Fatal(err)
	}
	if d.limit == 0 {
		d.limit = 100
	}
	if d.hits == 0 {
		d.hits = 1
	}
	if d.source == 0 {
		d.source = limiter.SourceStore
	}
	return limiter.RuleResult{
		Match:    m,
		Decision: algorithm.Decision{Allowed: d.allowed, Limit: d.limit, Remaining: d.remaining},
		Source:   d.source,
		Hits:     d.hits,
	}
}

// item builds one item: allowed unless an enforcing rule rejected it.
func item(t testing.TB, set *ruleset.Set, ds ...dec) limiter.ItemResult {
	t.Helper()
	it := limiter.ItemResult{Allowed: true}
	for _, d := range ds {
		r := result(t, set, d)
		if !r.Allowed && !r.Shadow() {
			it.Allowed = false
		}
		it.Results = append(it.Results, r)
	}
	return it
}

func response(items ...limiter.ItemResult) *limiter.Response {
	resp := &limiter.Response{Allowed: true, Items: items}
	for _, it := range items {
		resp.Allowed = resp.Allowed && it.Allowed
	}
	return resp
}

// feed tells agg about one decision of each of ds, each its own item.
func feed(t testing.TB, agg *usage.Aggregator, set *ruleset.Set, ds ...dec) {
	t.Helper()
	for _, d := range ds {
		agg.Checked(set.Domain(), response(item(t, set, d)), time.Millisecond)
	}
}

func newAggregator(t testing.TB, cfg usage.AggregatorConfig) *usage.Aggregator {
	t.Helper()
	agg, err := usage.NewAggregator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return agg
}

// byRule indexes a flush by rule id.
func byRule(rus []*weirv1.RuleUsage) map[string]*weirv1.RuleUsage {
	m := map[string]*weirv1.RuleUsage{}
	for _, ru := range rus {
		m[ru.RuleId] = ru
	}
	return m
}

// byKey indexes a rule's keys.
func byKey(ru *weirv1.RuleUsage) map[string]*weirv1.KeyUsage {
	m := map[string]*weirv1.KeyUsage{}
	if ru == nil {
		return m
	}
	for _, k := range ru.Keys {
		m[k.Key] = k
	}
	return m
}
