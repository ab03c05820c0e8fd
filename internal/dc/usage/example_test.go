package usage_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weirhq/weir/internal/dc/usage"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rulefile"
	"github.com/weirhq/weir/pkg/ruleset"
	"github.com/weirhq/weir/pkg/store/memstore"
)

// The Aggregator observes a limiter; a Reporter would call Flush every
// interval.
func ExampleAggregator() {
	rules, err := rulefile.Parse([]byte(`
domain: api
rules:
  - {rule_id: per-user, key_type: user_id, limit: 3, window_seconds: 60, algorithm: FixedWindow}
`))
	if err != nil {
		panic(err)
	}
	set, err := ruleset.Compile(rules)
	if err != nil {
		panic(err)
	}
	agg, err := usage.NewAggregator(usage.AggregatorConfig{})
	if err != nil {
		panic(err)
	}
	store, err := memstore.New(memstore.Config{})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l, err := limiter.New(limiter.Config{Store: store, Observer: agg, CacheKeys: -1, Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	if err := l.SetRules(set); err != nil {
		panic(err)
	}
	for range 4 {
		if _, err := l.Check(context.Background(), limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"user_id": "alice"}}}}); err != nil {
			panic(err)
		}
	}
	for _, ru := range agg.Flush() {
		fmt.Printf("%s/%s: offered %d, admitted %d, rejected %d\n", ru.Domain, ru.RuleId, ru.Offered, ru.Admitted, ru.Rejected)
		for _, k := range ru.Keys {
			fmt.Printf("  key %s (limit %d): offered %d, admitted %d, rejected %d\n", k.Key, k.Limit, k.Offered, k.Admitted, k.Rejected)
		}
	}
	// Output:
	// api/per-user: offered 4, admitted 3, rejected 1
	//   key alice (limit 3): offered 4, admitted 3, rejected 1
}
