package usage

import (
	"fmt"
	"testing"

	"github.com/weirhq/weir/internal/testkit/rulesettest"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/limiter"
)

// TestKeyMemoryReleased checks that tracked keys give their bytes back to
// the budget when untracked, and that a rule's key state is freed when
// idle.
func TestKeyMemoryReleased(t *testing.T) {
	set := rulesettest.Compile(t, `
domain: d
rules:
  - {rule_id: r, key_type: k, limit: 10, window_seconds: 1}
`)
	r, _ := set.Rule("r")
	agg, err := NewAggregator(AggregatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		m, err := r.KeyFor(fmt.Sprint("key-", i))
		if err != nil {
			t.Fatal(err)
		}
		agg.Checked("d", &limiter.Response{Items: []limiter.ItemResult{{Results: []limiter.RuleResult{{
			Match: m, Decision: algorithm.Decision{Limit: 10}, Source: limiter.SourceStore, Hits: 1,
		}}}}}, 0)
	}
	if got := agg.keyBytes.Load(); got < 100*keyOverhead {
		t.Fatalf("100 tracked keys charge %d bytes, want at least %d", got, 100*keyOverhead)
	}
	st := agg.byKey[ruleKey{"d", "r"}]
	for i := 1; i <= lingerIntervals+2; i++ {
		agg.Flush()
		st.mu.Lock()
		freed := st.keys == nil
		st.mu.Unlock()
		// Flush 1 reports the keys; the next three are quiet, and the third
		// untracks them, the key state being idle by then too.
		if want := i >= 1+lingerIntervals; freed != want {
			t.Fatalf("after %d idle flushes: key state freed %t, want %t", i, freed, want)
		}
	}
	if got := agg.keyBytes.Load(); got != 0 {
		t.Fatalf("after the keys were untracked: %d bytes charged, want 0", got)
	}
}

func TestDistinct(t *testing.T) {
	for _, n := range []int{0, 1, 10, 100, 1000, 5000} {
		agg, _ := NewAggregator(AggregatorConfig{})
		ks := &keyState{}
		for i := range n {
			agg.drop(ks, fmt.Sprint("k", i))
			agg.drop(ks, fmt.Sprint("k", i)) // repeats count once
		}
		got := distinct(ks.dropped)
		if diff := float64(got) - float64(n); diff > 0.05*float64(n)+1 || diff < -0.05*float64(n)-1 {
			t.Errorf("%d distinct keys: estimated %d, want within 5%%", n, got)
		}
	}
}
