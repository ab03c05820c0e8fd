package limiter_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/rulesettest"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
	"github.com/weirhq/weir/pkg/store/memstore"
	"github.com/weirhq/weir/pkg/store/redisstore"
)

const rulesYAML = `
domain: shop
rules:
  - rule_id: per-user-second
    key_type: user_id
    limit: 2
    window_seconds: 1
    algorithm: FixedWindow
  - rule_id: per-user-day
    key_type: user_id
    limit: 5
    window_seconds: 86400
    algorithm: SlidingWindowCounter
    overrides:
      - key: vip
        limit: 100
      - key: blocked
        action: deny
      - key: friend
        action: allow
  - rule_id: login
    path_pattern: /auth/login
    methods: [POST]
    key_type: username
    limit: 1
    window_seconds: 300
    algorithm: SlidingWindowLog
    rejection_message: Too many login attempts.
    retry_advice: exponential_backoff
  - rule_id: shadowed
    key_type: ip
    limit: 1
    window_seconds: 60
    shadow: true
  - rule_id: health
    path_pattern: /health
    key_type: ip
    unlimited: true
    overrides:
      - {key: 203.0.113.9, action: deny}
  - rule_id: disabled-rule
    key_type: user_id
    limit: 1
    window_seconds: 60
    enabled: false
`

var compile = rulesettest.Compile

// newClock returns the tests' fake clock at a fixed noon.
func newClock() *fakeclock.Clock {
	return fakeclock.New(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
}

// countingStore counts the calls that reach a real store.
type countingStore struct {
	limiter.Store
	decides atomic.Int64
}

func (s *countingStore) Decide(ctx context.Context, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error) {
	s.decides.Add(1)
	return s.Store.Decide(ctx, now, reqs)
}

func newLimiter(t testing.TB, store limiter.Store, c *fakeclock.Clock, mut ...func(*limiter.Config)) *limiter.Limiter {
	t.Helper()
	cfg := limiter.Config{Store: store, Now: c.Now}
	for _, m := range mut {
		m(&cfg)
	}
	l, err := limiter.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := l.SetRules(compile(t, rulesYAML)); err != nil {
		t.Fatal(err)
	}
	return l
}

func mem(t testing.TB) *memstore.Store {
	t.Helper()
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func check(t *testing.T, l *limiter.Limiter, attrs map[string]string, hits int64) limiter.ItemResult {
	t.Helper()
	resp, err := l.Check(context.Background(), limiter.Request{Items: []limiter.Item{{Attributes: attrs, Hits: hits}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Items[0]
}

func ruleIDs(it limiter.ItemResult) []string {
	var ids []string
	for _, r := range it.Results {
		ids = append(ids, r.Match.Rule.Spec.ID)
	}
	return ids
}

func TestAllMatchingRulesMustAllow(t *testing.T) {
	c := newClock()
	l := newLimiter(t, mem(t), c)
	user := map[string]string{"user_id": "u1", "path": "/api", "method": "GET"}
	for i := range 2 {
		it := check(t, l, user, 1)
		if !it.Allowed {
			t.Fatalf("request %d: got rejected, want allowed", i)
		}
		if got := ruleIDs(it); len(got) != 2 {
			t.Fatalf("got rules %v, want per-user-second and per-user-day", got)
		}
	}
	// Third in the same second: per-user-second rejects, and per-user-day
	// must get its unit back.
	it := check(t, l, user, 1)
	if it.Allowed {
		t.Fatal("third request in one second: got allowed")
	}
	if d := it.Results[it.Decisive]; d.Match.Rule.Spec.ID != "per-user-second" || d.Allowed {
		t.Fatalf("decisive: got %s allowed=%v, want per-user-second rejected", d.Match.Rule.Spec.ID, d.Allowed)
	}
	st, err := l.Status(context.Background(), "", "per-user-day", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Remaining != 3 {
		t.Fatalf("per-user-day after 2 admitted and 1 refunded: got remaining %d, want 3", st.Remaining)
	}
	// Next second: allowed again; the day rule now reports least remaining.
	c.Advance(time.Second)
	it = check(t, l, user, 1)
	if !it.Allowed || it.Results[it.Decisive].Match.Rule.Spec.ID != "per-user-second" {
		t.Fatalf("got allowed=%v decisive %v", it.Allowed, ruleIDs(it))
	}
}

func TestOverridesShadowUnlimitedDisabled(t *testing.T) {
	c := newClock()
	l := newLimiter(t, mem(t), c)
	tests := []struct {
		name        string
		attrs       map[string]string
		wantAllowed bool
		wantSource  map[string]limiter.Source
	}{
		{"deny list", map[string]string{"user_id": "blocked"}, false, map[string]limiter.Source{"per-user-day": limiter.SourceOverrideDeny, "per-user-second": limiter.SourceStore}},
		{"allow list", map[string]string{"user_id": "friend"}, true, map[string]limiter.Source{"per-user-day": limiter.SourceOverrideAllow}},
		{"unlimited", map[string]string{"path": "/health", "ip": "198.51.100.1"}, true, map[string]limiter.Source{"health": limiter.SourceUnlimited}},
		{"deny override of an unlimited rule", map[string]string{"path": "/health", "ip": "203.0.113.9"}, false, map[string]limiter.Source{"health": limiter.SourceOverrideDeny}},
		{"shadow admits", map[string]string{"ip": "192.0.2.1"}, true, map[string]limiter.Source{"shadowed": limiter.SourceStore}},
		{"shadow rejects but never blocks", map[string]string{"ip": "192.0.2.1"}, true, map[string]limiter.Source{"shadowed": limiter.SourceStore}},
		{"no rule matches", map[string]string{"other": "x"}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := check(t, l, tt.attrs, 1)
			if it.Allowed != tt.wantAllowed {
				t.Fatalf("got allowed=%v, want %v (%+v)", it.Allowed, tt.wantAllowed, it)
			}
			if tt.wantSource == nil && (len(it.Results) != 0 || it.Decisive != -1) {
				t.Fatalf("got results %v decisive %d, want none and -1", ruleIDs(it), it.Decisive)
			}
			for _, r := range it.Results {
				if r.Match.Rule.Spec.ID == "disabled-rule" {
					t.Fatal("disabled rule matched")
				}
				if want, ok := tt.wantSource[r.Match.Rule.Spec.ID]; ok && r.Source != want {
					t.Errorf("%s: got source %v, want %v", r.Match.Rule.Spec.ID, r.Source, want)
				}
			}
		})
	}
	// The shadow rule really counted: its second request was rejected.
	it := check(t, l, map[string]string{"ip": "192.0.2.1"}, 1)
	if r := it.Results[0]; r.Allowed || !r.Shadow() || !it.Allowed {
		t.Fatalf("shadow rule: got rule allowed=%v item allowed=%v, want rule rejected, item allowed", r.Allowed, it.Allowed)
	}
	// The VIP override's own limit applies.
	for i := range 2 {
		if it := check(t, l, map[string]string{"user_id": "vip"}, 1); !it.Allowed || it.Results[1].Limit != 100 {
			t.Fatalf("vip request %d: got %+v, want allowed under limit 100", i, it.Results[1])
		}
	}
}

func TestHotKeyCacheAbsorbsAndRuleChangeInvalidates(t *testing.T) {
	c := newClock()
	store := &countingStore{Store: mem(t)}
	l := newLimiter(t, store, c)
	login := map[string]string{"path": "/auth/login", "method": "POST", "username": "john"}
	if it := check(t, l, login, 1); !it.Allowed {
		t.Fatal("first login: got rejected")
	}
	it := check(t, l, login, 1)
	if it.Allowed || it.Results[0].Source != limiter.SourceStore {
		t.Fatalf("second login: got allowed=%v source %v, want rejected by the store", it.Allowed, it.Results[0].Source)
	}
	if msg := it.Results[0].Match.Rule.Spec.RejectionMessage; msg != "Too many login attempts." {
		t.Fatalf("got message %q", msg)
	}
	// Ristretto applies sets asynchronously; give it a moment.
	time.Sleep(20 * time.Millisecond)
	before := store.decides.Load()
	for i := range 10 {
		it = check(t, l, login, 1)
		if it.Allowed || it.Results[0].Source != limiter.SourceCache {
			t.Fatalf("hammering %d: got allowed=%v source %v, want rejected from cache", i, it.Allowed, it.Results[0].Source)
		}
		if it.Results[0].RetryAfter <= 0 {
			t.Fatalf("cached rejection without RetryAfter")
		}
	}
	if got := store.decides.Load() - before; got != 0 {
		t.Fatalf("got %d store calls for cached rejections, want 0", got)
	}
	hits, _ := l.CacheStats()
	if hits < 10 {
		t.Fatalf("got %d cache hits, want at least 10", hits)
	}
	// Raising the limit changes the rule: the cache must not answer for it.
	raised := compile(t, replace(rulesYAML, "    limit: 1\n    window_seconds: 300", "    limit: 3\n    window_seconds: 300"))
	if err := l.SetRules(raised); err != nil {
		t.Fatal(err)
	}
	if it := check(t, l, login, 1); !it.Allowed || it.Results[0].Source != limiter.SourceStore {
		t.Fatalf("after raising the limit: got allowed=%v source %v, want allowed by the store", it.Allowed, it.Results[0].Source)
	}
	// Time passing past RetryAfter ends the cache's say too.
	c.Advance(301 * time.Second)
	if it := check(t, l, login, 1); !it.Allowed {
		t.Fatal("after the window: got rejected")
	}
}

func replace(s, old, new string) string {
	i := len(s)
	for j := 0; j+len(old) <= len(s); j++ {
		if s[j:j+len(old)] == old {
			i = j
			break
		}
	}
	if i == len(s) {
		panic("replace: not found: " + old)
	}
	return s[:i] + new + s[i+len(old):]
}

type fixedShare float64

func (f fixedShare) Limits(_ string, _ *ruleset.Rule, _ string, limit, burst int64) (int64, int64) {
	return rule.LocalLimit(0, 0, float64(f), limit), rule.LocalLimit(0, 0, float64(f), burst)
}

func TestGlobalRulesEnforceTheDCShare(t *testing.T) {
	c := newClock()
	l := newLimiter(t, mem(t), c, func(cfg *limiter.Config) { cfg.Quotas = fixedShare(0.5) })
	user := map[string]string{"user_id": "s"}
	allowed := 0
	for range 10 {
		c.Advance(2 * time.Second) // stay clear of the per-second rule
		if check(t, l, user, 1).Allowed {
			allowed++
		}
	}
	if allowed != 2 {
		t.Fatalf("share 0.5 of a daily limit of 5: got %d admitted, want floor(2.5) = 2", allowed)
	}
}

func TestInvalidRequests(t *testing.T) {
	l := newLimiter(t, mem(t), newClock())
	big := make(map[string]string)
	for i := range limiter.MaxAttributes + 1 {
		big[string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	long := string(make([]byte, limiter.MaxValueLen+1))
	tests := []struct {
		name string
		req  limiter.Request
		want error
	}{
		{"no items", limiter.Request{}, limiter.ErrInvalid},
		{"too many items", limiter.Request{Items: make([]limiter.Item, limiter.MaxItems+1)}, limiter.ErrInvalid},
		{"too many attributes", limiter.Request{Items: []limiter.Item{{Attributes: big}}}, limiter.ErrInvalid},
		{"huge value", limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"user_id": long}}}}, limiter.ErrInvalid},
		{"empty attribute name", limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"": "x"}}}}, limiter.ErrInvalid},
		{"negative hits", limiter.Request{Items: []limiter.Item{{Hits: -1}}}, limiter.ErrInvalid},
		{"huge hits", limiter.Request{Items: []limiter.Item{{Hits: limiter.MaxHits + 1}}}, limiter.ErrInvalid},
		{"unknown domain", limiter.Request{Domain: "nope", Items: []limiter.Item{{}}}, limiter.ErrUnknownDomain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := l.Check(context.Background(), tt.req); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := l.Status(context.Background(), "", "nope", "k"); !errors.Is(err, limiter.ErrUnknownRule) {
		t.Errorf("status of an unknown rule: got %v, want ErrUnknownRule", err)
	}
	empty, _ := limiter.New(limiter.Config{Store: mem(t)})
	defer empty.Close()
	if _, err := empty.Check(context.Background(), limiter.Request{Items: []limiter.Item{{}}}); !errors.Is(err, limiter.ErrNoRules) {
		t.Errorf("no rules loaded: got %v, want ErrNoRules", err)
	}
}

func TestBatchOfItems(t *testing.T) {
	store := &countingStore{Store: mem(t)}
	l := newLimiter(t, store, newClock())
	var items []limiter.Item
	for _, u := range []string{"a", "b", "a", "a"} {
		items = append(items, limiter.Item{Attributes: map[string]string{"user_id": u}})
	}
	resp, err := l.Check(context.Background(), limiter.Request{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, true, true, false}
	for i, w := range want {
		if resp.Items[i].Allowed != w {
			t.Errorf("item %d: got allowed=%v, want %v", i, resp.Items[i].Allowed, w)
		}
	}
	if resp.Allowed {
		t.Error("overall: got allowed with one item rejected")
	}
	if got := store.decides.Load(); got != 1 {
		t.Errorf("got %d store calls for one Check, want 1", got)
	}
}

const modesYAML = `
domain: modes
rules:
  - {rule_id: open, key_type: k, limit: 1, window_seconds: 60, failure_mode: open, conditions: {mode: open}}
  - {rule_id: closed, key_type: k, limit: 1, window_seconds: 60, failure_mode: closed, conditions: {mode: closed}}
  - {rule_id: local, key_type: k, limit: 2, window_seconds: 60, failure_mode: local, conditions: {mode: local}}
`

// TestFailureModesAgainstADeadRedis stops a real redis-server and checks
// every failure mode, the breaker that keeps decisions fast, and recovery.
func TestFailureModesAgainstADeadRedis(t *testing.T) {
	srv := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 50 * time.Millisecond, ContextTimeoutEnabled: true})
	defer rc.Close()
	rs, err := redisstore.New(rc, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := limiter.New(limiter.Config{Store: rs, CacheKeys: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.SetRules(compile(t, modesYAML)); err != nil {
		t.Fatal(err)
	}
	req := func(mode string) limiter.RuleResult {
		resp, err := l.Check(context.Background(), limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"mode": mode, "k": "x"}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Items[0].Results[0]
	}
	if r := req("open"); r.Source != limiter.SourceStore || !r.Allowed {
		t.Fatalf("healthy: got %v allowed=%v", r.Source, r.Allowed)
	}
	srv.Stop()
	tests := []struct {
		mode    string
		source  limiter.Source
		allowed []bool
	}{
		{"open", limiter.SourceFailureOpen, []bool{true, true, true}},
		{"closed", limiter.SourceFailureClosed, []bool{false, false}},
		{"local", limiter.SourceFailureLocal, []bool{true, true, false}},
	}
	for _, tt := range tests {
		for i, want := range tt.allowed {
			start := time.Now()
			r := req(tt.mode)
			if r.Source != tt.source || r.Allowed != want {
				t.Errorf("%s request %d: got source %v allowed=%v, want %v allowed=%v", tt.mode, i, r.Source, r.Allowed, tt.source, want)
			}
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Errorf("%s request %d took %v with Redis dead", tt.mode, i, d)
			}
		}
	}
	if err := l.Ready(context.Background()); err == nil {
		t.Error("Ready with Redis dead: got nil")
	}
	srv.Restart(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := req("open")
		if r.Source == limiter.SourceStore {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis back for 5s: still %v", r.Source)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOversizedKeyIsRefusedNotAllowed: attribute values at their size
// limit can make a composite key too long to store; such a request must be
// refused, never let past the rule.
func TestOversizedKeyIsRefusedNotAllowed(t *testing.T) {
	l, err := limiter.New(limiter.Config{Store: mem(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.SetRules(compile(t, `
domain: wide
rules:
  - {rule_id: wide, key_type: [a, b, c, d, e], limit: 1, window_seconds: 60}
`)); err != nil {
		t.Fatal(err)
	}
	v := strings.Repeat("x", limiter.MaxValueLen)
	_, err = l.Check(context.Background(), limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"a": v, "b": v, "c": v, "d": v, "e": v}}}})
	if !errors.Is(err, limiter.ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
}

// deadlineStore records whether Decide's context had a deadline, and
// claims to bound its calls by bound.
type deadlineStore struct {
	limiter.Store
	bound       time.Duration
	hadDeadline atomic.Bool
}

func (s *deadlineStore) CallBound() time.Duration { return s.bound }

func (s *deadlineStore) Decide(ctx context.Context, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error) {
	_, ok := ctx.Deadline()
	s.hadDeadline.Store(ok)
	return s.Store.Decide(ctx, now, reqs)
}

// The limiter bounds each store call by StoreTimeout itself, unless the
// store bounds its calls within that (limiter.Bounded).
func TestStoreTimeoutUnlessTheStoreBoundsItsCalls(t *testing.T) {
	for _, tc := range []struct {
		name         string
		bound        time.Duration
		wantDeadline bool
	}{
		{"no bound", 0, true},
		{"bound within the timeout", 20 * time.Millisecond, false},
		{"bound beyond the timeout", time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &deadlineStore{Store: mem(t), bound: tc.bound}
			clock := newClock()
			l := newLimiter(t, s, clock, func(c *limiter.Config) { c.StoreTimeout = 20 * time.Millisecond })
			// A new adaptive bound is the ceiling until it has seen a
			// window of calls: let it learn that the store is fast.
			check(t, l, map[string]string{"user_id": "v"}, 1)
			clock.Advance(5 * time.Second)
			check(t, l, map[string]string{"user_id": "v"}, 1)
			if it := check(t, l, map[string]string{"user_id": "u"}, 1); !it.Allowed {
				t.Fatal("got rejected, want allowed")
			}
			if got := s.hadDeadline.Load(); got != tc.wantDeadline {
				t.Fatalf("store call with a deadline: got %v, want %v", got, tc.wantDeadline)
			}
		})
	}
}

// Every decision of a limited rule counts as a cache lookup, made or not:
// a rule that never went over its limit is not looked up (nothing can be
// cached for it), yet counts a miss. Reloading the same rules keeps what
// the cache knows.
func TestCacheStatsAndReloadKeepTheCache(t *testing.T) {
	c := newClock()
	store := &countingStore{Store: mem(t)}
	l := newLimiter(t, store, c)
	user := map[string]string{"user_id": "ann"}
	for range 2 {
		if it := check(t, l, user, 1); !it.Allowed {
			t.Fatal("user under her limits: got rejected")
		}
	}
	if hits, misses := l.CacheStats(); hits != 0 || misses != 4 {
		t.Fatalf("two checks of two limited rules: got %d hits, %d misses; want 0, 4", hits, misses)
	}
	login := map[string]string{"path": "/auth/login", "method": "POST", "username": "bob"}
	check(t, l, login, 1)
	if it := check(t, l, login, 1); it.Allowed {
		t.Fatal("second login: got allowed")
	}
	// Ristretto applies sets asynchronously: wait for the cache to answer.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if it := check(t, l, login, 1); it.Results[0].Source == limiter.SourceCache {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("rejected login: the cache never answered")
		}
	}
	if err := l.SetRules(compile(t, rulesYAML)); err != nil {
		t.Fatal(err)
	}
	before := store.decides.Load()
	if it := check(t, l, login, 1); it.Allowed || it.Results[0].Source != limiter.SourceCache {
		t.Fatalf("after reloading the same rules: got allowed=%v source %v, want rejected from cache", it.Allowed, it.Results[0].Source)
	}
	if got := store.decides.Load() - before; got != 0 {
		t.Fatalf("got %d store calls for a cached rejection, want 0", got)
	}
}

// TestCacheRemembersOnlyCostOneRejections: a rejection of a larger cost
// says nothing about when a cost-1 request could pass, so it must not put
// the key in the hot-key cache.
func TestCacheRemembersOnlyCostOneRejections(t *testing.T) {
	l := newLimiter(t, mem(t), newClock())
	user := map[string]string{"user_id": "big"}
	if it := check(t, l, user, 2); !it.Allowed {
		t.Fatal("first request of cost 2: got rejected")
	}
	if it := check(t, l, user, 3); it.Allowed {
		t.Fatal("cost 3 over a per-second limit of 2: got allowed")
	}
	time.Sleep(20 * time.Millisecond) // Ristretto sets are asynchronous
	it := check(t, l, user, 1)
	for _, r := range it.Results {
		if r.Source == limiter.SourceCache {
			t.Fatalf("rule %s: got a cached answer after a cost-3 rejection, want the store's", r.Match.Rule.Spec.ID)
		}
	}
}
