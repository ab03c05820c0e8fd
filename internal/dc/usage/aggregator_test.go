package usage_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/dc/usage"
	"github.com/weirhq/weir/internal/testkit/rulesettest"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/ruleset"
	"github.com/weirhq/weir/pkg/store/memstore"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

func TestAggregatorConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  usage.AggregatorConfig
		ok   bool
	}{
		{"zero", usage.AggregatorConfig{}, true},
		{"disabled keys", usage.AggregatorConfig{TopK: -1, MaxKeys: -1}, true},
		{"huge TopK", usage.AggregatorConfig{TopK: 1 << 30}, false},
		{"negative MaxKeyBytes", usage.AggregatorConfig{MaxKeyBytes: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := usage.NewAggregator(tc.cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("NewAggregator(%+v) error = %v, want ok %t", tc.cfg, err, tc.ok)
			}
		})
	}
}

// counts is a rule's or key's offered, admitted and rejected.
type counts struct{ offered, admitted, rejected uint64 }

func ruleCounts(ru *weirv1.RuleUsage) counts {
	if ru == nil {
		return counts{}
	}
	return counts{ru.Offered, ru.Admitted, ru.Rejected}
}

func keyCounts(k *weirv1.KeyUsage) counts {
	if k == nil {
		return counts{}
	}
	return counts{k.Offered, k.Admitted, k.Rejected}
}

// TestAggregatorCounts checks what each kind of decision counts as, per
// rule.
func TestAggregatorCounts(t *testing.T) {
	set := compile(t)
	for _, tc := range []struct {
		name  string
		items [][]dec // one item per entry
		want  map[string]counts
	}{
		{
			name:  "store admits",
			items: [][]dec{{{rule: "per-user", key: "u1", allowed: true, remaining: 90}}},
			want:  map[string]counts{"per-user": {1, 1, 0}},
		},
		{
			name:  "store rejects",
			items: [][]dec{{{rule: "per-user", key: "u1"}}},
			want:  map[string]counts{"per-user": {1, 0, 1}},
		},
		{
			name:  "hits count, not decisions",
			items: [][]dec{{{rule: "per-user", key: "u1", allowed: true, remaining: 90, hits: 5}}, {{rule: "per-user", key: "u1", hits: 7}}},
			want:  map[string]counts{"per-user": {12, 5, 7}},
		},
		{
			name:  "a shadow rule's refusal is a rejection though the request passes",
			items: [][]dec{{{rule: "shadow-user", key: "u1"}, {rule: "per-user", key: "u1", allowed: true, remaining: 90}}},
			want:  map[string]counts{"shadow-user": {1, 0, 1}, "per-user": {1, 1, 0}},
		},
		{
			name:  "allowed by the rule, rejected by another: offered only",
			items: [][]dec{{{rule: "per-user", key: "u1", allowed: true, remaining: 90}, {rule: "site", remaining: 0}}},
			want:  map[string]counts{"per-user": {1, 0, 0}, "site": {1, 0, 1}},
		},
		{
			name: "cache, failure modes and deny overrides count",
			items: [][]dec{
				{{rule: "per-user", key: "u1", source: limiter.SourceCache}},
				{{rule: "per-user", key: "u2", source: limiter.SourceFailureOpen, allowed: true, remaining: 100}},
				{{rule: "per-user", key: "u3", source: limiter.SourceFailureClosed}},
				{{rule: "per-user", key: "u4", source: limiter.SourceFailureLocal, allowed: true, remaining: 50}},
				{{rule: "per-user", key: "blocked", source: limiter.SourceOverrideDeny}},
			},
			want: map[string]counts{"per-user": {5, 2, 3}},
		},
		{
			name: "allow overrides and unlimited rules do not count",
			items: [][]dec{
				{{rule: "per-user", key: "friend", source: limiter.SourceOverrideAllow, allowed: true}},
				{{rule: "free", key: "u1", source: limiter.SourceUnlimited, allowed: true}},
			},
			want: map[string]counts{},
		},
		{
			name:  "local rules do not count",
			items: [][]dec{{{rule: "per-ip-local", key: "192.0.2.1"}}},
			want:  map[string]counts{},
		},
		{
			name:  "keyless rule",
			items: [][]dec{{{rule: "site", allowed: true, remaining: 999}}, {{rule: "site", allowed: true, remaining: 998}}},
			want:  map[string]counts{"site": {2, 2, 0}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agg := newAggregator(t, usage.AggregatorConfig{})
			for _, ds := range tc.items {
				agg.Checked(set.Domain(), response(item(t, set, ds...)), 0)
			}
			got := byRule(agg.Flush())
			if len(got) != len(tc.want) {
				t.Errorf("got usage of %d rules, want %d: %v", len(got), len(tc.want), got)
			}
			for id, want := range tc.want {
				ru := got[id]
				if c := ruleCounts(ru); c != want {
					t.Errorf("rule %s: got %+v, want %+v", id, c, want)
				}
				if ru != nil && (ru.Domain != "shop" || ru.Share != 1) {
					t.Errorf("rule %s: got domain %q share %v, want shop and 1", id, ru.Domain, ru.Share)
				}
			}
			if again := agg.Flush(); len(again) != 0 {
				t.Errorf("second Flush = %v, want nothing", again)
			}
		})
	}
}

type keySharesFunc func(domain, ruleID, key string) bool

func (f keySharesFunc) HasKeyShare(domain, ruleID, key string) bool { return f(domain, ruleID, key) }

// TestAggregatorPressure checks which keys one interval reports, with the
// sketch off so that only pressure and key shares count.
func TestAggregatorPressure(t *testing.T) {
	set := compile(t)
	shared := keySharesFunc(func(domain, ruleID, key string) bool {
		return domain == "shop" && ruleID == "per-user" && key == "shared"
	})
	for _, tc := range []struct {
		name      string
		cfg       usage.AggregatorConfig
		decs      []dec
		rule      string
		want      map[string]counts
		wantLimit map[string]int64
		dropped   uint64
	}{
		{
			name: "comfortable keys are not reported",
			decs: []dec{{rule: "per-user", key: "a", allowed: true, remaining: 25, limit: 100}},
			rule: "per-user",
			want: map[string]counts{},
		},
		{
			name: "exact counts from the first rejection",
			decs: []dec{
				{rule: "per-user", key: "a", allowed: true, remaining: 50},
				{rule: "per-user", key: "a", hits: 2},
				{rule: "per-user", key: "a", allowed: true, remaining: 60, hits: 3},
			},
			rule: "per-user",
			want: map[string]counts{"a": {5, 3, 2}},
		},
		{
			name: "near the limit: under a quarter left",
			decs: []dec{
				{rule: "per-user", key: "near", allowed: true, remaining: 24, limit: 100},
				{rule: "per-user", key: "quarter", allowed: true, remaining: 25, limit: 100},
				{rule: "per-user", key: "small", allowed: true, remaining: 0, limit: 1},
			},
			rule: "per-user",
			want: map[string]counts{"near": {1, 1, 0}, "small": {1, 1, 0}},
		},
		{
			name: "cache and failure_local decisions signal pressure",
			decs: []dec{
				{rule: "per-user", key: "cached", source: limiter.SourceCache},
				{rule: "per-user", key: "local", source: limiter.SourceFailureLocal, allowed: true, remaining: 1, limit: 10},
			},
			rule: "per-user",
			want: map[string]counts{"cached": {1, 0, 1}, "local": {1, 1, 0}},
		},
		{
			name: "deny overrides and failure modes open and closed do not",
			decs: []dec{
				{rule: "per-user", key: "blocked", source: limiter.SourceOverrideDeny},
				{rule: "per-user", key: "closed", source: limiter.SourceFailureClosed},
				{rule: "per-user", key: "open", source: limiter.SourceFailureOpen, allowed: true, remaining: 0},
			},
			rule: "per-user",
			want: map[string]counts{},
		},
		{
			name: "a shadow rule's refusals are pressure",
			decs: []dec{{rule: "shadow-user", key: "a", limit: 10}},
			rule: "shadow-user",
			want: map[string]counts{"a": {1, 0, 1}},
		},
		{
			name: "a key with a share of its own",
			cfg:  usage.AggregatorConfig{KeyShares: shared},
			decs: []dec{
				{rule: "per-user", key: "shared", allowed: true, remaining: 90},
				{rule: "per-user", key: "other", allowed: true, remaining: 90},
			},
			rule: "per-user",
			want: map[string]counts{"shared": {1, 1, 0}},
		},
		{
			name:      "limit is the key's global limit: the override's",
			decs:      []dec{{rule: "per-user", key: "vip", limit: 300}, {rule: "per-user", key: "a", limit: 30}},
			rule:      "per-user",
			want:      map[string]counts{"vip": {1, 0, 1}, "a": {1, 0, 1}},
			wantLimit: map[string]int64{"vip": 1000, "a": 100},
		},
		{
			name: "keyless rules report no keys",
			decs: []dec{{rule: "site", limit: 1000}},
			rule: "site",
			want: map[string]counts{},
		},
		{
			name: "MaxKeys bounds the keys; the rest are counted as dropped",
			cfg:  usage.AggregatorConfig{MaxKeys: 2},
			decs: []dec{
				{rule: "per-user", key: "a"}, {rule: "per-user", key: "b"},
				{rule: "per-user", key: "c"}, {rule: "per-user", key: "d"}, {rule: "per-user", key: "c"},
			},
			rule:    "per-user",
			want:    map[string]counts{"a": {1, 0, 1}, "b": {1, 0, 1}},
			dropped: 2,
		},
		{
			name: "MaxKeyBytes bounds the keys' memory",
			cfg:  usage.AggregatorConfig{MaxKeyBytes: 200 + 500},
			decs: []dec{
				{rule: "per-user", key: strings.Repeat("x", 500)},
				{rule: "per-user", key: strings.Repeat("y", 500)},
			},
			rule:    "per-user",
			want:    map[string]counts{strings.Repeat("x", 500): {1, 0, 1}},
			dropped: 1,
		},
		{
			name:    "keys that are not UTF-8 cannot be reported",
			decs:    []dec{{rule: "per-user", key: "bad\xff"}, {rule: "per-user", key: "good"}},
			rule:    "per-user",
			want:    map[string]counts{"good": {1, 0, 1}},
			dropped: 1,
		},
		{
			name: "MaxKeys negative: no exact keys",
			cfg:  usage.AggregatorConfig{MaxKeys: -1},
			decs: []dec{{rule: "per-user", key: "a"}},
			rule: "per-user",
			want: map[string]counts{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.TopK = -1
			agg := newAggregator(t, cfg)
			feed(t, agg, set, tc.decs...)
			ru := byRule(agg.Flush())[tc.rule]
			if ru == nil {
				t.Fatalf("no usage for rule %s", tc.rule)
			}
			got := byKey(ru)
			if len(got) != len(tc.want) {
				t.Errorf("got %d keys, want %d: %v", len(got), len(tc.want), ru.Keys)
			}
			for key, want := range tc.want {
				if c := keyCounts(got[key]); c != want {
					t.Errorf("key %.20q: got %+v, want %+v", key, c, want)
				}
			}
			for key, want := range tc.wantLimit {
				if k := got[key]; k == nil || k.Limit != want {
					t.Errorf("key %q: got limit of %v, want %d", key, k, want)
				}
			}
			if ru.KeysDropped != tc.dropped {
				t.Errorf("got %d keys dropped, want %d", ru.KeysDropped, tc.dropped)
			}
		})
	}
}

// TestAggregatorHeavyHitters checks that a heavy hitter is reported with
// the sketch's estimate, then tracked exactly.
func TestAggregatorHeavyHitters(t *testing.T) {
	set := compile(t)
	agg := newAggregator(t, usage.AggregatorConfig{TopK: 8})
	ok := func(key string, hits int64) dec {
		return dec{rule: "per-user", key: key, allowed: true, remaining: 90, hits: hits}
	}
	// Interval 1: "elephant" takes 50 of 150 hits; 100 mice take 1 each.
	// With 8 counters the heavy threshold is 150/8 = 18.
	feed(t, agg, set, ok("elephant", 50))
	for i := range 100 {
		feed(t, agg, set, ok(fmt.Sprint("mouse-", i), 1))
	}
	ru := byRule(agg.Flush())["per-user"]
	keys := byKey(ru)
	if len(keys) != 1 || keys["elephant"] == nil {
		t.Fatalf("interval 1: got keys %v, want only elephant", ru.Keys)
	}
	e := keys["elephant"]
	// The sketch never undercounts, and overcounts by at most 150/8.
	if e.Offered < 50 || e.Offered > 50+150/8 || e.Admitted != e.Offered || e.Rejected != 0 || e.Limit != 100 {
		t.Errorf("interval 1: elephant = %v, want offered = admitted in [50, 68], limit 100", e)
	}
	if ruleCounts(ru) != (counts{150, 150, 0}) {
		t.Errorf("interval 1: rule counts %+v, want 150 admitted", ruleCounts(ru))
	}

	// Interval 2: elephant is tracked exactly, from the start.
	feed(t, agg, set, ok("elephant", 3), dec{rule: "per-user", key: "elephant", hits: 2})
	for i := range 20 {
		feed(t, agg, set, ok(fmt.Sprint("mouse-", i), 1))
	}
	keys = byKey(byRule(agg.Flush())["per-user"])
	if c := keyCounts(keys["elephant"]); c != (counts{5, 3, 2}) {
		t.Errorf("interval 2: elephant = %+v, want exactly {5 3 2}", c)
	}
}

// TestAggregatorEarlierHits checks that a key found under pressure during
// an interval has its earlier hits of the interval estimated from the
// sketch, never above the truth.
func TestAggregatorEarlierHits(t *testing.T) {
	set := compile(t)
	agg := newAggregator(t, usage.AggregatorConfig{TopK: 4})
	for range 40 {
		feed(t, agg, set, dec{rule: "per-user", key: "a", allowed: true, remaining: 80})
	}
	feed(t, agg, set, dec{rule: "per-user", key: "a", hits: 2})
	keys := byKey(byRule(agg.Flush())["per-user"])
	if c := keyCounts(keys["a"]); c != (counts{42, 40, 2}) {
		t.Fatalf("got %+v, want {42 40 2}", c)
	}
}

// TestAggregatorKeyLifetime checks that a key stays tracked while under
// pressure and three intervals after.
func TestAggregatorKeyLifetime(t *testing.T) {
	set := compile(t)
	agg := newAggregator(t, usage.AggregatorConfig{TopK: -1})
	steps := []struct {
		decs   []dec
		report bool // whether "a" is reported
	}{
		{[]dec{{rule: "per-user", key: "a"}}, true},                                           // pressure
		{[]dec{{rule: "per-user", key: "a", allowed: true, remaining: 90}}, true},             // quiet 1
		{[]dec{{rule: "per-user", key: "a", allowed: true, remaining: 90}}, true},             // quiet 2
		{[]dec{{rule: "per-user", key: "a", allowed: true, remaining: 90}}, true},             // quiet 3: last
		{[]dec{{rule: "per-user", key: "a", allowed: true, remaining: 90}}, false},            // untracked
		{[]dec{{rule: "per-user", key: "a", allowed: true, remaining: 10, limit: 100}}, true}, // pressure again
		{nil, false}, // no traffic: nothing to report
		{[]dec{{rule: "per-user", key: "a", allowed: true, remaining: 90}}, true},
	}
	for i, s := range steps {
		feed(t, agg, set, s.decs...)
		_, got := byKey(byRule(agg.Flush())["per-user"])["a"]
		if got != s.report {
			t.Errorf("interval %d: a reported %t, want %t", i+1, got, s.report)
		}
	}
}

type recordingShares struct {
	mu    sync.Mutex
	rules []*ruleset.Rule
	keys  []string
	share float64
}

func (s *recordingShares) Share(domain string, r *ruleset.Rule, key string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, r)
	s.keys = append(s.keys, key)
	return s.share
}

// TestAggregatorShare checks that the share reported is the Shares' for
// the last compiled rule seen, across a reload.
func TestAggregatorShare(t *testing.T) {
	sh := &recordingShares{share: 0.25}
	agg := newAggregator(t, usage.AggregatorConfig{Shares: sh})
	old := compile(t)
	feed(t, agg, old, dec{rule: "site", allowed: true, remaining: 900})
	ru := byRule(agg.Flush())["site"]
	if ru.Share != 0.25 {
		t.Fatalf("share = %v, want 0.25", ru.Share)
	}
	oldRule, _ := old.Rule("site")
	if len(sh.rules) != 1 || sh.rules[0] != oldRule || sh.keys[0] != "" {
		t.Fatalf("Share called with %v, %q; want the rule and key \"\"", sh.rules, sh.keys)
	}

	// A reload compiles new rules: counts continue under the same rule id,
	// and Share gets the new compiled rule.
	reloaded := compile(t)
	newRule, _ := reloaded.Rule("site")
	feed(t, agg, old, dec{rule: "site", allowed: true, remaining: 900})
	feed(t, agg, reloaded, dec{rule: "site", allowed: true, remaining: 900}, dec{rule: "site", allowed: true, remaining: 900})
	rus := agg.Flush()
	if len(rus) != 1 || rus[0].Offered != 3 {
		t.Fatalf("after reload: got %v, want one rule with 3 offered", rus)
	}
	if got := sh.rules[len(sh.rules)-1]; got != newRule {
		t.Fatal("after reload: Share called with the old compiled rule")
	}
}

// TestAggregatorConcurrent feeds decisions from many goroutines while
// another flushes, and checks that every hit is counted exactly once.
func TestAggregatorConcurrent(t *testing.T) {
	set := compile(t)
	agg := newAggregator(t, usage.AggregatorConfig{TopK: 16, MaxKeys: 64})
	const goroutines, perG = 8, 3000
	kinds := []*limiter.Response{
		response(item(t, set, dec{rule: "per-user", key: "hot", hits: 3})),                                                  // rejected: "hot" always under pressure
		response(item(t, set, dec{rule: "per-user", key: "calm", allowed: true, remaining: 90, hits: 2})),                   // admitted
		response(item(t, set, dec{rule: "per-user", key: "hot", allowed: true, remaining: 10}, dec{rule: "site", hits: 1})), // passed + site rejected
		response(item(t, set, dec{rule: "shadow-user", key: "hot", limit: 10}, dec{rule: "site", allowed: true, remaining: 500})),
	}
	var wg sync.WaitGroup
	var stop atomic.Bool
	var flushes []*weirv1.RuleUsage
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		for !stop.Load() {
			flushes = append(flushes, agg.Flush()...)
		}
	}()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				agg.Checked("shop", kinds[(g+i)%len(kinds)], 0)
				for range (g + i) % 5 {
					agg.Checked("shop", response(item(t, set, dec{rule: "per-user", key: fmt.Sprint("u", (g*perG+i)%500), allowed: true, remaining: 90})), 0)
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	<-flushed
	flushes = append(flushes, agg.Flush()...)

	// Expected totals.
	var want = map[string]counts{}
	var wantHot counts
	for g := range goroutines {
		for i := range perG {
			switch (g + i) % len(kinds) {
			case 0:
				add(want, "per-user", counts{3, 0, 3})
				wantHot = counts{wantHot.offered + 3, wantHot.admitted, wantHot.rejected + 3}
			case 1:
				add(want, "per-user", counts{2, 2, 0})
			case 2:
				add(want, "per-user", counts{1, 0, 0})
				add(want, "site", counts{1, 0, 1})
				wantHot.offered++
			case 3:
				add(want, "shadow-user", counts{1, 0, 1})
				add(want, "site", counts{1, 1, 0})
			}
			add(want, "per-user", counts{uint64((g + i) % 5), uint64((g + i) % 5), 0})
		}
	}
	got := map[string]counts{}
	var gotHot counts
	for _, ru := range flushes {
		add(got, ru.RuleId, ruleCounts(ru))
		if ru.RuleId == "per-user" {
			k := keyCounts(byKey(ru)["hot"])
			gotHot = counts{gotHot.offered + k.offered, gotHot.admitted + k.admitted, gotHot.rejected + k.rejected}
		}
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("rule %s: got %+v over all flushes, want %+v", id, got[id], w)
		}
	}
	// "hot" is under pressure from its first decision on, every interval
	// it is seen: its counts are exact.
	if gotHot != wantHot {
		t.Errorf("key hot: got %+v over all flushes, want %+v", gotHot, wantHot)
	}
	t.Logf("%d rule entries over the flushes", len(flushes))
}

func add(m map[string]counts, id string, c counts) {
	o := m[id]
	m[id] = counts{o.offered + c.offered, o.admitted + c.admitted, o.rejected + c.rejected}
}

// TestAggregatorAllocations checks that Checked allocates nothing once the
// rules and keys are known, even when the sketch replaces keys.
func TestAggregatorAllocations(t *testing.T) {
	set := compile(t)
	agg := newAggregator(t, usage.AggregatorConfig{KeyShares: keySharesFunc(func(_, _, key string) bool { return key == "shared" })})
	var resps []*limiter.Response
	for i := range 500 {
		resps = append(resps, response(item(t, set,
			dec{rule: "per-user", key: fmt.Sprint("user-", i), allowed: true, remaining: 90},
			dec{rule: "site", allowed: true, remaining: 900},
			dec{rule: "per-ip-local", key: "192.0.2.1", allowed: true, remaining: 9},
		)))
	}
	resps = append(resps,
		response(item(t, set, dec{rule: "per-user", key: "hot"})),
		response(item(t, set, dec{rule: "per-user", key: "shared", allowed: true, remaining: 90})))
	for _, r := range resps {
		agg.Checked("shop", r, 0)
	}
	i := 0
	allocs := testing.AllocsPerRun(5000, func() {
		agg.Checked("shop", resps[i%len(resps)], 0)
		i += 13
	})
	if allocs != 0 {
		t.Fatalf("Checked allocates %.2f times per call, want 0", allocs)
	}
}

// TestAggregatorWithLimiter runs a real limiter with the Aggregator as
// its observer.
func TestAggregatorWithLimiter(t *testing.T) {
	const yaml = `
domain: api
rules:
  - {rule_id: per-user, key_type: user_id, limit: 3, window_seconds: 60, algorithm: FixedWindow}
  - {rule_id: per-tenant, key_type: tenant, limit: 4, window_seconds: 60, algorithm: FixedWindow}
  - {rule_id: local, scope: local, key_type: user_id, limit: 100, window_seconds: 60}
`
	agg := newAggregator(t, usage.AggregatorConfig{TopK: -1})
	l := observedLimiter(t, agg, yaml)
	check := func(user string) bool {
		resp, err := l.Check(context.Background(), limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"user_id": user, "tenant": "acme"}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Allowed
	}
	// alice: 3 allowed, then per-user rejects; bob: the tenant's 4th is
	// allowed, then per-tenant rejects him while per-user allows (and is
	// refunded).
	var allowed int
	for _, u := range []string{"alice", "alice", "alice", "alice", "bob", "bob"} {
		if check(u) {
			allowed++
		}
	}
	if allowed != 4 {
		t.Fatalf("%d allowed, want 4", allowed)
	}
	got := byRule(agg.Flush())
	if len(got) != 2 {
		t.Fatalf("usage of %d rules, want 2 (the local one is not reported): %v", len(got), got)
	}
	// per-user: alice 3 admitted + 1 rejected; bob 1 admitted, 1 passed
	// (allowed, then given back because per-tenant rejected).
	if c := ruleCounts(got["per-user"]); c != (counts{6, 4, 1}) {
		t.Errorf("per-user: %+v, want {6 4 1}", c)
	}
	// per-tenant: alice's 4th request was rejected by per-user, so
	// per-tenant's quota was given back; bob's first takes the 4th unit.
	if c := ruleCounts(got["per-tenant"]); c != (counts{6, 4, 1}) {
		t.Errorf("per-tenant: %+v, want {6 4 1}", c)
	}
	keys := byKey(got["per-user"])
	if c := keyCounts(keys["alice"]); c.rejected != 1 {
		t.Errorf("alice: %+v, want her rejection tracked", c)
	}
	if k := byKey(got["per-tenant"])["acme"]; k == nil || k.Limit != 4 {
		t.Errorf("tenant acme: %v, want tracked with limit 4", k)
	}
}

// observedLimiter returns a limiter on a memory store, at a fixed time,
// with the rules of yaml and agg as its observer.
func observedLimiter(t *testing.T, agg *usage.Aggregator, yaml string) *limiter.Limiter {
	t.Helper()
	store, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l, err := limiter.New(limiter.Config{Store: store, Observer: agg, CacheKeys: -1, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := l.SetRules(rulesettest.Compile(t, yaml)); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestAggregatorRefundOnReject: with limiter.Request.RefundOnReject, an
// item under its limit in a rejected request is allowed and given back:
// its hits are reported passed, not admitted.
func TestAggregatorRefundOnReject(t *testing.T) {
	agg := newAggregator(t, usage.AggregatorConfig{TopK: -1})
	l := observedLimiter(t, agg, `
domain: api
rules:
  - {rule_id: per-user, key_type: user_id, limit: 1, window_seconds: 60, algorithm: FixedWindow}
`)
	user := func(u string) limiter.Item { return limiter.Item{Attributes: map[string]string{"user_id": u}} }
	for i, items := range [][]limiter.Item{{user("alice")}, {user("alice"), user("bob")}} {
		if _, err := l.Check(context.Background(), limiter.Request{Items: items, RefundOnReject: true}); err != nil {
			t.Fatalf("check %d: %v", i+1, err)
		}
	}
	// alice: 1 admitted, then 1 rejected; bob: allowed beside her
	// rejection, and given back: offered, not admitted.
	if c := ruleCounts(byRule(agg.Flush())["per-user"]); c != (counts{3, 1, 1}) {
		t.Errorf("per-user: %+v, want {3 1 1}", c)
	}
}

func TestAggregatorIgnoresNil(t *testing.T) {
	agg := newAggregator(t, usage.AggregatorConfig{})
	agg.Checked("shop", nil, 0)
	agg.Checked("shop", &limiter.Response{Items: []limiter.ItemResult{{Results: []limiter.RuleResult{{}}}}}, 0)
	agg.StoreCall(0, errors.New("x"))
	agg.BreakerState(0)
	if got := agg.Flush(); len(got) != 0 {
		t.Fatalf("Flush = %v, want nothing", got)
	}
}
