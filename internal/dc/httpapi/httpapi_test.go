package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weirhq/weir/internal/dc/envoyrls"
	"github.com/weirhq/weir/internal/dc/httpapi"
	"github.com/weirhq/weir/internal/dc/metrics"
	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/internal/testkit/rulesettest"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rulefile"
	"github.com/weirhq/weir/pkg/ruleset"
	"github.com/weirhq/weir/pkg/store/memstore"
)

// rulesYAML has one rule per kind of answer the API gives. Conditions and
// distinct key attributes keep the rules from overlapping except where a
// test wants several to match (login and per-ip).
const rulesYAML = `
domain: shop
rules:
  - rule_id: login
    path_pattern: /auth/login
    methods: [POST]
    key_type: username
    limit: 2
    window_seconds: 300
    algorithm: SlidingWindowLog
    rejection_message: Too many login attempts.
    retry_advice: exponential_backoff
  - rule_id: per-ip
    path_pattern: /auth/**
    key_type: ip
    limit: 10
    window_seconds: 60
    algorithm: FixedWindow
  - rule_id: seed
    key_type: client_id
    limit: 2
    window_seconds: 60
    algorithm: FixedWindow
  - rule_id: tenant-user
    key_type: [tenant, user_id]
    limit: 3
    window_seconds: 60
    algorithm: TokenBucket
  - rule_id: health
    path_pattern: /health
    unlimited: true
  - rule_id: trial
    conditions: {plan: trial}
    key_type: user_id
    limit: 1
    window_seconds: 60
    shadow: true
  - rule_id: accounts
    key_type: account
    limit: 5
    window_seconds: 60
    algorithm: FixedWindow
    overrides:
      - {key: evil, action: deny}
      - {key: friend, action: allow}
  - rule_id: beta-strict
    conditions: {plan: beta}
    key_type: user_id
    limit: 1
    window_seconds: 60
    algorithm: FixedWindow
    shadow: true
  - rule_id: beta
    conditions: {plan: beta}
    key_type: user_id
    limit: 5
    window_seconds: 60
    algorithm: FixedWindow
  - rule_id: archive
    key_type: archive
    limit: 5
    window_seconds: 60
    enabled: false
`

// noLimitHeaders are the rate-limit header fields, all absent: the answer
// of a request no enforcing limit bounds.
var noLimitHeaders = map[string]string{
	"X-RateLimit-Limit": "", "X-RateLimit-Remaining": "", "X-RateLimit-Reset": "", "RateLimit-Policy": "", "RateLimit": "", "Retry-After": "",
}

// t0 is the fake clock's start: on a minute boundary, so fixed windows end
// at round times.
var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

var compile = rulesettest.Compile

// fixture is an API server over a real limiter and memory store, on a
// fake clock shared by the limiter and the server.
type fixture struct {
	lim   *limiter.Limiter
	clock *fakeclock.Clock
	url   string
}

// newFixture starts a server with rules (none when rules is "").
func newFixture(t testing.TB, rules string, mut ...func(*httpapi.Config)) *fixture {
	t.Helper()
	store, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := fakeclock.New(t0)
	reg := prometheus.NewRegistry()
	met, err := metrics.NewLimiter(reg)
	if err != nil {
		t.Fatal(err)
	}
	// The hot-key cache fills asynchronously; without it every source is
	// deterministic.
	lim, err := limiter.New(limiter.Config{Store: store, Now: c.Now, CacheKeys: -1, Observer: met})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	if rules != "" {
		if err := lim.SetRules(compile(t, rules)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := httpapi.Config{Limiter: lim, Now: c.Now, Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	for _, m := range mut {
		m(&cfg)
	}
	api, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &fixture{lim: lim, clock: c, url: srv.URL}
}

// reply is an HTTP response, read.
type reply struct {
	code   int
	header http.Header
	body   []byte
}

func (f *fixture) do(t testing.TB, method, path, contentType, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, b}
}

func (f *fixture) post(t testing.TB, path, body string) reply {
	t.Helper()
	return f.do(t, http.MethodPost, path, "application/json", body)
}

func (f *fixture) get(t testing.TB, path string) reply {
	t.Helper()
	return f.do(t, http.MethodGet, path, "", "")
}

// decode decodes r's body strictly into v.
func decode(t testing.TB, r reply, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// fields returns the names of the JSON object r's body holds.
func fields(t testing.TB, body []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	return slices.Sorted(maps.Keys(m))
}

// wantFields fails unless the object in body, which what names, has
// every name in want.
func wantFields(t testing.TB, what string, body []byte, want ...string) {
	t.Helper()
	got := fields(t, body)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%s fields: got %v, want %q among them", what, got, w)
		}
	}
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// checkStep is one POST /v1/check and what it must answer.
type checkStep struct {
	name string
	body string
	code int
	// resp is the expected body, without Results and ResetAt, which
	// results and resetAt give.
	resp    httpapi.CheckResponse
	resetAt time.Time // zero: reset_at absent
	results []httpapi.RuleResult
	// headers: "" means absent.
	headers map[string]string
}

func runSteps(t *testing.T, f *fixture, steps []checkStep) {
	t.Helper()
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			r := f.post(t, "/v1/check", s.body)
			if r.code != s.code {
				t.Fatalf("status: got %d, want %d (body %s)", r.code, s.code, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type: got %q, want application/json", ct)
			}
			for name, want := range s.headers {
				if got := r.header.Get(name); got != want {
					t.Errorf("header %s: got %q, want %q", name, got, want)
				}
				if want == "" && len(r.header.Values(name)) > 0 {
					t.Errorf("header %s: got %q, want it absent", name, r.header.Values(name))
				}
			}
			var got httpapi.CheckResponse
			decode(t, r, &got)
			want := s.resp
			if !s.resetAt.IsZero() {
				want.ResetAt = rfc3339(s.resetAt)
			}
			want.Results = s.results
			if want.Results == nil {
				want.Results = []httpapi.RuleResult{}
			}
			want = withZeros(want)
			if diff := compareJSON(got, want); diff != "" {
				t.Errorf("body: %s", diff)
			}
			// The field names, as written on the wire.
			wantFields(t, "body", r.body, "allowed", "matched", "results")
			if got.RuleID != "" {
				wantFields(t, "body", r.body, "rule_id")
			}
			if got.Limit != nil {
				wantFields(t, "body", r.body, "limit", "remaining", "reset_at", "retry_after_seconds")
			}
			var raw struct {
				Results []json.RawMessage `json:"results"`
			}
			if err := json.Unmarshal(r.body, &raw); err != nil {
				t.Fatal(err)
			}
			for i, res := range raw.Results {
				wantFields(t, fmt.Sprintf("results[%d]", i), res, "rule_id", "key", "allowed", "window_seconds", "source")
				if got.Results[i].Limit != nil {
					wantFields(t, fmt.Sprintf("results[%d]", i), res, "limit", "remaining", "reset_at", "retry_after_seconds")
				}
			}
		})
	}
}

func n(v int64) *int64 { return &v }

// withZeros gives the results of want from a limit (see
// limiter.RuleResult.Limited), and its top level when it has a limit, the
// zero values the steps leave out: a limit always reports limit,
// remaining and retry_after_seconds.
func withZeros(want httpapi.CheckResponse) httpapi.CheckResponse {
	fill := func(limit, remaining, retry **int64) {
		for _, p := range []**int64{limit, remaining, retry} {
			if *p == nil {
				*p = n(0)
			}
		}
	}
	rs := make([]httpapi.RuleResult, len(want.Results))
	for i, r := range want.Results {
		switch r.Source {
		case "unlimited", "override_allow", "override_deny", "disabled":
		default:
			fill(&r.Limit, &r.Remaining, &r.RetryAfterSeconds)
		}
		rs[i] = r
	}
	want.Results = rs
	if want.Limit != nil {
		fill(&want.Limit, &want.Remaining, &want.RetryAfterSeconds)
	}
	return want
}

// compareJSON compares got and want as their JSON, so that a difference
// reads as the wire would.
func compareJSON(got, want any) string {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if bytes.Equal(g, w) {
		return ""
	}
	return fmt.Sprintf("got %s, want %s", g, w)
}

func TestCheck(t *testing.T) {
	f := newFixture(t, rulesYAML)
	login := `{"domain":"shop","attributes":{"ip":"192.0.2.1","username":"john","path":"/auth/login","method":"POST"},"hits":1}`
	loginReset := t0.Add(300 * time.Second)
	minute := t0.Add(time.Minute)
	loginResult := func(allowed bool, remaining, retry int64) httpapi.RuleResult {
		r := httpapi.RuleResult{RuleID: "login", Key: "john", Allowed: allowed, Limit: n(2), Remaining: n(remaining), ResetAt: rfc3339(loginReset),
			RetryAfterSeconds: n(retry), WindowSeconds: 300, Source: "store"}
		if !allowed {
			r.RetryAdvice = "exponential_backoff"
		}
		return r
	}
	perIP := func(remaining int64) httpapi.RuleResult {
		return httpapi.RuleResult{RuleID: "per-ip", Key: "192.0.2.1", Allowed: true, Limit: n(10), Remaining: n(remaining), ResetAt: rfc3339(minute), WindowSeconds: 60, Source: "store"}
	}
	refunded := func(r httpapi.RuleResult) httpapi.RuleResult { r.Refunded = true; return r }
	policy := `"login";q=2;w=300, "per-ip";q=10;w=60`
	steps := []checkStep{
		{
			name: "first login allowed", body: login, code: http.StatusOK,
			resp:    httpapi.CheckResponse{Allowed: true, Matched: true, RuleID: "login", Key: "john", Limit: n(2), Remaining: n(1)},
			resetAt: loginReset,
			results: []httpapi.RuleResult{loginResult(true, 1, 0), perIP(9)},
			headers: map[string]string{
				"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": unix(loginReset),
				"RateLimit-Policy": policy, "RateLimit": `"login";r=1;t=300`, "Retry-After": "",
			},
		},
		{
			name: "second login allowed, none left", body: login, code: http.StatusOK,
			resp:    httpapi.CheckResponse{Allowed: true, Matched: true, RuleID: "login", Key: "john", Limit: n(2), Remaining: n(0)},
			resetAt: loginReset,
			results: []httpapi.RuleResult{loginResult(true, 0, 0), perIP(8)},
			headers: map[string]string{"X-RateLimit-Remaining": "0", "RateLimit": `"login";r=0;t=300`, "Retry-After": ""},
		},
		{
			// per-ip allowed it, but the request as a whole is rejected, so
			// per-ip gets its unit back: 8 left, not 7.
			name: "third login rejected", body: login, code: http.StatusTooManyRequests,
			resp: httpapi.CheckResponse{Allowed: false, Matched: true, RuleID: "login", Key: "john", Limit: n(2), Remaining: n(0), RetryAfterSeconds: n(300),
				Error: "RATE_LIMIT_EXCEEDED", Message: "Too many login attempts."},
			resetAt: loginReset,
			results: []httpapi.RuleResult{loginResult(false, 0, 300), refunded(perIP(8))},
			headers: map[string]string{
				"Retry-After": "300", "X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": unix(loginReset),
				"RateLimit-Policy": policy, "RateLimit": `"login";r=0;t=300`,
			},
		},
		{
			name: "another user from the same ip", body: `{"attributes":{"ip":"192.0.2.1","username":"jane","path":"/auth/login","method":"POST"}}`, code: http.StatusOK,
			resp:    httpapi.CheckResponse{Allowed: true, Matched: true, RuleID: "login", Key: "jane", Limit: n(2), Remaining: n(1)},
			resetAt: loginReset,
			results: []httpapi.RuleResult{{RuleID: "login", Key: "jane", Allowed: true, Limit: n(2), Remaining: n(1), ResetAt: rfc3339(loginReset), WindowSeconds: 300, Source: "store"}, perIP(7)},
		},
		{
			name: "hits spends several", body: `{"attributes":{"ip":"192.0.2.1","path":"/auth/other"},"hits":5}`, code: http.StatusOK,
			resp:    httpapi.CheckResponse{Allowed: true, Matched: true, RuleID: "per-ip", Key: "192.0.2.1", Limit: n(10), Remaining: n(2)},
			resetAt: minute,
			results: []httpapi.RuleResult{perIP(2)},
			headers: map[string]string{"RateLimit-Policy": `"per-ip";q=10;w=60`, "RateLimit": `"per-ip";r=2;t=60`, "X-RateLimit-Reset": unix(minute)},
		},
		{
			name: "no rule matches", body: `{"attributes":{"nothing":"here"}}`, code: http.StatusOK,
			resp: httpapi.CheckResponse{Allowed: true, Matched: false, Message: "no rule matched; allowed"},
			headers: map[string]string{
				"X-RateLimit-Limit": "", "X-RateLimit-Remaining": "", "X-RateLimit-Reset": "", "RateLimit-Policy": "", "RateLimit": "", "Retry-After": "",
			},
		},
		{
			name: "no attributes at all", body: `{}`, code: http.StatusOK,
			resp: httpapi.CheckResponse{Allowed: true, Matched: false, Message: "no rule matched; allowed"},
		},
		{
			name: "composite key", body: `{"attributes":{"tenant":"acme","user_id":"a|b"}}`, code: http.StatusOK,
			resp:    httpapi.CheckResponse{Allowed: true, Matched: true, RuleID: "tenant-user", Key: `acme|a\|b`, Limit: n(3), Remaining: n(2)},
			resetAt: t0.Add(20 * time.Second), // one token of 3 at 3 a minute
			results: []httpapi.RuleResult{{RuleID: "tenant-user", Key: `acme|a\|b`, Allowed: true, Limit: n(3), Remaining: n(2), ResetAt: rfc3339(t0.Add(20 * time.Second)), WindowSeconds: 60, Source: "store"}},
		},
		{
			name: "descriptors are attributes", body: `{"descriptors":[{"key":"tenant","value":"acme"},{"key":"user_id","value":"a|b"}]}`, code: http.StatusOK,
			resp:    httpapi.CheckResponse{Allowed: true, Matched: true, RuleID: "tenant-user", Key: `acme|a\|b`, Limit: n(3), Remaining: n(1)},
			resetAt: t0.Add(40 * time.Second),
			results: []httpapi.RuleResult{{RuleID: "tenant-user", Key: `acme|a\|b`, Allowed: true, Limit: n(3), Remaining: n(1), ResetAt: rfc3339(t0.Add(40 * time.Second)), WindowSeconds: 60, Source: "store"}},
		},
		{
			// An unlimited rule sets no limit, so no rate-limit fields.
			name: "unlimited", body: `{"attributes":{"path":"/health"}}`, code: http.StatusOK,
			resp:    httpapi.CheckResponse{Allowed: true, Matched: true, RuleID: "health"},
			results: []httpapi.RuleResult{{RuleID: "health", Allowed: true, Source: "unlimited"}},
			headers: noLimitHeaders,
		},
		{
			name: "allow override", body: `{"attributes":{"account":"friend"}}`, code: http.StatusOK,
			resp:    httpapi.CheckResponse{Allowed: true, Matched: true, RuleID: "accounts", Key: "friend"},
			results: []httpapi.RuleResult{{RuleID: "accounts", Key: "friend", Allowed: true, WindowSeconds: 60, Source: "override_allow"}},
			headers: noLimitHeaders,
		},
		{
			// A deny is for good: 403, no retry promised, no limit.
			name: "deny override", body: `{"attributes":{"account":"evil"}}`, code: http.StatusForbidden,
			resp: httpapi.CheckResponse{Allowed: false, Matched: true, RuleID: "accounts", Key: "evil",
				Error: "RATE_LIMIT_DENIED", Message: `Access denied: rule "accounts" denies this key.`},
			results: []httpapi.RuleResult{{RuleID: "accounts", Key: "evil", WindowSeconds: 60, Source: "override_deny"}},
			headers: noLimitHeaders,
		},
		{
			name: "shadow rule admits", body: `{"attributes":{"plan":"trial","user_id":"u1"}}`, code: http.StatusOK,
			resp:    httpapi.CheckResponse{Allowed: true, Matched: true, Message: "only shadow rules matched; allowed"},
			results: []httpapi.RuleResult{{RuleID: "trial", Key: "u1", Allowed: true, Limit: n(1), ResetAt: rfc3339(t0.Add(2 * time.Minute)), WindowSeconds: 60, Shadow: true, Source: "store"}},
			headers: noLimitHeaders,
		},
		{
			name: "shadow rule rejects, the request passes", body: `{"attributes":{"plan":"trial","user_id":"u1"}}`, code: http.StatusOK,
			// A sliding window counter with 1 in this window lets the next
			// request through only once the next window has fully slid
			// past it: 120s.
			resp:    httpapi.CheckResponse{Allowed: true, Matched: true, Message: "only shadow rules matched; allowed"},
			results: []httpapi.RuleResult{{RuleID: "trial", Key: "u1", Allowed: false, Limit: n(1), ResetAt: rfc3339(t0.Add(2 * time.Minute)), RetryAfterSeconds: n(120), WindowSeconds: 60, Shadow: true, Source: "store", RetryAdvice: "retry_after"}},
			headers: noLimitHeaders,
		},
		{
			// The shadow rule has less left than the enforcing one: the
			// answer is the enforcing rule's all the same.
			name: "shadow rule at its limit beside an enforcing rule", body: `{"attributes":{"plan":"beta","user_id":"b1"}}`, code: http.StatusOK,
			resp:    httpapi.CheckResponse{Allowed: true, Matched: true, RuleID: "beta", Key: "b1", Limit: n(5), Remaining: n(4)},
			resetAt: minute,
			results: []httpapi.RuleResult{
				{RuleID: "beta-strict", Key: "b1", Allowed: true, Limit: n(1), ResetAt: rfc3339(minute), WindowSeconds: 60, Shadow: true, Source: "store"},
				{RuleID: "beta", Key: "b1", Allowed: true, Limit: n(5), Remaining: n(4), ResetAt: rfc3339(minute), WindowSeconds: 60, Source: "store"},
			},
			headers: map[string]string{
				"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "4", "X-RateLimit-Reset": unix(minute),
				"RateLimit-Policy": `"beta";q=5;w=60`, "RateLimit": `"beta";r=4;t=60`, "Retry-After": "",
			},
		},
		{
			name: "shadow rule rejecting beside an enforcing rule", body: `{"attributes":{"plan":"beta","user_id":"b1"}}`, code: http.StatusOK,
			resp:    httpapi.CheckResponse{Allowed: true, Matched: true, RuleID: "beta", Key: "b1", Limit: n(5), Remaining: n(3)},
			resetAt: minute,
			results: []httpapi.RuleResult{
				{RuleID: "beta-strict", Key: "b1", Allowed: false, Limit: n(1), ResetAt: rfc3339(minute), RetryAfterSeconds: n(60), WindowSeconds: 60, Shadow: true, Source: "store", RetryAdvice: "retry_after"},
				{RuleID: "beta", Key: "b1", Allowed: true, Limit: n(5), Remaining: n(3), ResetAt: rfc3339(minute), WindowSeconds: 60, Source: "store"},
			},
			headers: map[string]string{
				"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "3",
				"RateLimit-Policy": `"beta";q=5;w=60`, "RateLimit": `"beta";r=3;t=60`, "Retry-After": "",
			},
		},
		{
			name: "a disabled rule applies to nothing", body: `{"attributes":{"archive":"a1"}}`, code: http.StatusOK,
			resp:    httpapi.CheckResponse{Allowed: true, Matched: false, Message: "no rule matched; allowed"},
			headers: noLimitHeaders,
		},
	}
	runSteps(t, f, steps)
}

// TestCheckWindowPasses checks that the clock the server is given drives
// the decisions and the relative header fields.
func TestCheckWindowPasses(t *testing.T) {
	f := newFixture(t, rulesYAML)
	seed := `{"clientId":"c1"}`
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		if r := f.post(t, "/v1/check", seed); r.code != want {
			t.Fatalf("request %d: got %d, want %d", i, r.code, want)
		}
	}
	f.clock.Advance(45 * time.Second)
	r := f.post(t, "/v1/check", seed)
	if r.code != http.StatusTooManyRequests {
		t.Fatalf("45s later: got %d, want 429", r.code)
	}
	if got := r.header.Get("Retry-After"); got != "15" {
		t.Errorf("Retry-After 45s into a 60s window: got %q, want 15", got)
	}
	if got := r.header.Get("RateLimit"); got != `"seed";r=0;t=15` {
		t.Errorf("RateLimit: got %q, want %q", got, `"seed";r=0;t=15`)
	}
	f.clock.Advance(15 * time.Second)
	if r := f.post(t, "/v1/check", seed); r.code != http.StatusOK {
		t.Fatalf("next window: got %d, want 200 (%s)", r.code, r.body)
	}
}

// TestCheckCalendarMonth checks a monthly plan end to end: its answers
// reset at midnight UTC on the 1st (t0 is 22 November 2026), and its
// window moves on then, not 31 days after anything.
func TestCheckCalendarMonth(t *testing.T) {
	f := newFixture(t, `
domain: shop
rules:
  - {rule_id: plan, key_type: tenant, limit: 2, algorithm: FixedWindow, calendar: month}
`)
	body := `{"attributes":{"tenant":"acme"}}`
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		if r := f.post(t, "/v1/check", body); r.code != want {
			t.Fatalf("request %d: got %d, want %d (%s)", i, r.code, want, r.body)
		}
	}
	r := f.post(t, "/v1/check", body)
	if got, want := r.header.Get("Retry-After"), fmt.Sprint(int((12*time.Hour + 8*24*time.Hour).Seconds())); got != want {
		t.Errorf("Retry-After: got %q, want %q (midnight, 1 December)", got, want)
	}
	var res struct {
		Results []struct {
			ResetAt string `json:"reset_at"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.body, &res); err != nil || len(res.Results) != 1 {
		t.Fatalf("body %s: %v", r.body, err)
	}
	if got := res.Results[0].ResetAt; got != "2026-12-01T00:00:00Z" {
		t.Errorf("reset_at %q, want 2026-12-01T00:00:00Z", got)
	}
	f.clock.Advance(8*24*time.Hour + 12*time.Hour) // 1 December, 00:00 UTC
	if r := f.post(t, "/v1/check", body); r.code != http.StatusOK {
		t.Fatalf("on the 1st: got %d, want 200 (%s)", r.code, r.body)
	}
}

func TestShouldAllowRequest(t *testing.T) {
	f := newFixture(t, rulesYAML)
	tests := []struct {
		name string
		body string
		code int
		want string // the whole body
	}{
		{"first", `{"clientId":"123","timestamp":"2026-11-22T12:00:00Z"}`, http.StatusOK, `{"allowed":true}`},
		{"second, without timestamp", `{"clientId":"123"}`, http.StatusOK, `{"allowed":true}`},
		{"third is over the limit, still 200", `{"clientId":"123","timestamp":"2026-11-22T12:00:00.123+01:00"}`, http.StatusOK, `{"allowed":false}`},
		{"another client", `{"clientId":"456","timestamp":"2026-11-22T12:00:00Z"}`, http.StatusOK, `{"allowed":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.post(t, "/shouldAllowRequest", tt.body)
			if r.code != tt.code {
				t.Fatalf("status: got %d, want %d (%s)", r.code, tt.code, r.body)
			}
			if got := strings.TrimSpace(string(r.body)); got != tt.want {
				t.Errorf("body: got %s, want %s", got, tt.want)
			}
		})
	}
	// The client id is the attribute client_id: the check API sees the
	// same counter.
	r := f.post(t, "/v1/check", `{"attributes":{"client_id":"123"}}`)
	if r.code != http.StatusTooManyRequests {
		t.Fatalf("check of client_id 123 after 3 seed requests: got %d, want 429", r.code)
	}

	bad := []struct {
		name string
		body string
	}{
		{"bad timestamp", `{"clientId":"123","timestamp":"yesterday"}`},
		{"timestamp without zone", `{"clientId":"123","timestamp":"2026-11-22T12:00:00"}`},
		{"timestamp as a number", `{"clientId":"123","timestamp":1763812800}`},
		{"missing clientId", `{"timestamp":"2026-11-22T12:00:00Z"}`},
		{"empty clientId", `{"clientId":""}`},
		{"clientId as a number", `{"clientId":123}`},
		{"unknown field", `{"clientId":"123","client":"x"}`},
		{"huge clientId", `{"clientId":"` + strings.Repeat("x", limiter.MaxValueLen+1) + `"}`},
		{"malformed", `{"clientId":`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			wantBadRequest(t, f.post(t, "/shouldAllowRequest", tt.body), http.StatusBadRequest)
		})
	}
}

// wantBadRequest fails unless r is the JSON error code wants.
func wantBadRequest(t testing.TB, r reply, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("status: got %d, want %d (body %s)", r.code, code, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", ct)
	}
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	decode(t, r, &e)
	if e.Error == "" || e.Message == "" {
		t.Errorf("error body: got %s, want non-empty error and message", r.body)
	}
	for _, h := range []string{"Retry-After", "X-RateLimit-Remaining", "RateLimit"} {
		if v := r.header.Get(h); v != "" {
			t.Errorf("header %s on an error: got %q, want none", h, v)
		}
	}
}

func TestStatus(t *testing.T) {
	f := newFixture(t, rulesYAML)
	for range 2 {
		if r := f.post(t, "/v1/check", `{"attributes":{"username":"john","path":"/auth/login","method":"POST"}}`); r.code != http.StatusOK {
			t.Fatalf("login: got %d, want 200", r.code)
		}
	}
	if r := f.post(t, "/v1/check", `{"attributes":{"tenant":"acme","user_id":"a|b"}}`); r.code != http.StatusOK {
		t.Fatalf("tenant-user: got %d, want 200", r.code)
	}
	tests := []struct {
		name string
		path string
		want httpapi.StatusResponse
	}{
		{"spent", "/v1/rate-limits/login/john", httpapi.StatusResponse{RuleID: "login", Key: "john", Limit: n(2), Remaining: n(0), WindowSeconds: 300, ResetTime: rfc3339(t0.Add(300 * time.Second)), Source: "store"}},
		{"status consumes nothing", "/v1/rate-limits/login/john", httpapi.StatusResponse{RuleID: "login", Key: "john", Limit: n(2), Remaining: n(0), WindowSeconds: 300, ResetTime: rfc3339(t0.Add(300 * time.Second)), Source: "store"}},
		{"unseen key", "/v1/rate-limits/login/jane", httpapi.StatusResponse{RuleID: "login", Key: "jane", Limit: n(2), Remaining: n(2), WindowSeconds: 300, ResetTime: rfc3339(t0), Source: "store"}},
		{"with the domain", "/v1/rate-limits/login/jane?domain=shop", httpapi.StatusResponse{RuleID: "login", Key: "jane", Limit: n(2), Remaining: n(2), WindowSeconds: 300, ResetTime: rfc3339(t0), Source: "store"}},
		{"composite key, escaped in the path", "/v1/rate-limits/tenant-user/acme%7Ca%5C%7Cb", httpapi.StatusResponse{RuleID: "tenant-user", Key: `acme|a\|b`, Limit: n(3), Remaining: n(2), WindowSeconds: 60, ResetTime: rfc3339(t0.Add(20 * time.Second)), Source: "store"}},
		{"key with a slash", "/v1/rate-limits/seed/a/b", httpapi.StatusResponse{RuleID: "seed", Key: "a/b", Limit: n(2), Remaining: n(2), WindowSeconds: 60, ResetTime: rfc3339(t0), Source: "store"}},
		{"deny override", "/v1/rate-limits/accounts/evil", httpapi.StatusResponse{RuleID: "accounts", Key: "evil", WindowSeconds: 60, Source: "override_deny", Message: "an override denies this key"}},
		{"allow override", "/v1/rate-limits/accounts/friend", httpapi.StatusResponse{RuleID: "accounts", Key: "friend", WindowSeconds: 60, Source: "override_allow", Message: "no limit applies to this key"}},
		{"unlimited", "/v1/rate-limits/health/", httpapi.StatusResponse{RuleID: "health", Source: "unlimited", Message: "no limit applies to this key"}},
		{"disabled rule", "/v1/rate-limits/archive/a1", httpapi.StatusResponse{RuleID: "archive", Key: "a1", Disabled: true, WindowSeconds: 60, Source: "disabled", Message: "the rule is disabled: it applies to no request"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.get(t, tt.path)
			if r.code != http.StatusOK {
				t.Fatalf("status: got %d, want 200 (%s)", r.code, r.body)
			}
			var got httpapi.StatusResponse
			decode(t, r, &got)
			if diff := compareJSON(got, tt.want); diff != "" {
				t.Error(diff)
			}
			wantFields(t, "body", r.body, "rule_id", "key", "window_seconds", "source")
			if tt.want.Limit != nil {
				wantFields(t, "body", r.body, "limit", "remaining", "reset_time")
			}
		})
	}
	errs := []struct {
		name    string
		path    string
		code    int
		kind    string
		message string // "": not compared
	}{
		{"unknown rule", "/v1/rate-limits/nope/john", http.StatusNotFound, "NOT_FOUND", ""},
		{"unknown domain", "/v1/rate-limits/login/john?domain=other", http.StatusBadRequest, "INVALID_REQUEST", ""},
		{"composite key with one value", "/v1/rate-limits/tenant-user/acme", http.StatusBadRequest, "INVALID_REQUEST", ""},
		{"composite key with an empty value", "/v1/rate-limits/tenant-user/acme%7C", http.StatusBadRequest, "INVALID_REQUEST", ""},
		{"composite key with a bad escape", "/v1/rate-limits/tenant-user/acme%7Ca%5Cb", http.StatusBadRequest, "INVALID_REQUEST", ""},
		{"huge key", "/v1/rate-limits/login/" + strings.Repeat("k", 5000), http.StatusBadRequest, "INVALID_REQUEST", ""},
		{"key too long for the store", "/v1/rate-limits/login/" + strings.Repeat("k", 4090), http.StatusBadRequest, "INVALID_REQUEST", ""},
		// Escapes of bytes that are not UTF-8 are refused as /v1/check
		// refuses them, not answered for a key of U+FFFD.
		{"key not UTF-8", "/v1/rate-limits/login/%ff%fe", http.StatusBadRequest, "INVALID_REQUEST", "key: not valid UTF-8"},
		{"key partly not UTF-8", "/v1/rate-limits/login/jo%c3hn", http.StatusBadRequest, "INVALID_REQUEST", "key: not valid UTF-8"},
		{"rule id not UTF-8", "/v1/rate-limits/log%80in/john", http.StatusBadRequest, "INVALID_REQUEST", "rule_id: not valid UTF-8"},
		{"domain not UTF-8", "/v1/rate-limits/login/john?domain=sh%ffop", http.StatusBadRequest, "INVALID_REQUEST", "domain: not valid UTF-8"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			r := f.get(t, tt.path)
			wantBadRequest(t, r, tt.code)
			var e struct{ Error, Message string }
			_ = json.Unmarshal(r.body, &e)
			if e.Error != tt.kind {
				t.Errorf("error: got %q, want %q", e.Error, tt.kind)
			}
			if tt.message != "" && e.Message != tt.message {
				t.Errorf("message: got %q, want %q", e.Message, tt.message)
			}
		})
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	f := newFixture(t, "")
	tests := []struct {
		name string
		path string
		code int
		body string // a substring of the body
	}{
		{"healthz before rules", "/healthz", http.StatusOK, `"status":"ok"`},
		{"readyz before rules", "/readyz", http.StatusServiceUnavailable, `"status":"not ready"`},
		{"check before rules", "/v1/check", http.StatusServiceUnavailable, `"error":"UNAVAILABLE"`},
		{"status before rules", "/v1/rate-limits/login/john", http.StatusServiceUnavailable, `"error":"UNAVAILABLE"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r reply
			if tt.path == "/v1/check" {
				r = f.post(t, tt.path, `{"attributes":{"username":"john"}}`)
			} else {
				r = f.get(t, tt.path)
			}
			if r.code != tt.code || !strings.Contains(string(r.body), tt.body) {
				t.Fatalf("got %d %s, want %d with %s", r.code, r.body, tt.code, tt.body)
			}
		})
	}
	if err := f.lim.SetRules(compile(t, rulesYAML)); err != nil {
		t.Fatal(err)
	}
	if r := f.get(t, "/readyz"); r.code != http.StatusOK || !strings.Contains(string(r.body), `"status":"ready","rules":"loaded","domains":1,"rule_count":10`) {
		t.Fatalf("readyz with rules: got %d %s, want 200 ready, loaded", r.code, r.body)
	}
	f.post(t, "/v1/check", `{"clientId":"m"}`)
	f.post(t, "/v1/check", `{"clientId":"m"}`)
	f.post(t, "/v1/check", `{"clientId":"m"}`)
	// per-ip admits the third login, which login rejects: refunded.
	for range 3 {
		f.post(t, "/v1/check", `{"attributes":{"ip":"192.0.2.9","username":"m","path":"/auth/login","method":"POST"}}`)
	}
	r := f.get(t, "/metrics")
	if r.code != http.StatusOK {
		t.Fatalf("metrics: got %d, want 200", r.code)
	}
	for _, want := range []string{
		`weir_decisions_total{domain="shop",result="allowed",rule="seed",source="store"} 2`,
		`weir_decisions_total{domain="shop",result="rejected",rule="seed",source="store"} 1`,
		`weir_decisions_total{domain="shop",result="allowed",rule="per-ip",source="store"} 2`,
		`weir_decisions_total{domain="shop",result="refunded",rule="per-ip",source="store"} 1`,
		`weir_decisions_total{domain="shop",result="rejected",rule="login",source="store"} 1`,
		`weir_check_duration_seconds_count 6`,
		`weir_store_duration_seconds_count`,
		`weir_store_errors_total 0`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("metrics: got no line with %s", want)
		}
	}

	noMetrics := newFixture(t, rulesYAML, func(c *httpapi.Config) { c.Metrics = nil })
	if r := noMetrics.get(t, "/metrics"); r.code != http.StatusNotFound {
		t.Errorf("metrics without a handler: got %d, want 404", r.code)
	}
}

// TestHealthcheck: GET /healthcheck answers as envoyproxy/ratelimit's
// does — 200 "OK" while ready, 500 otherwise — with /readyz's check (rules
// loaded, store answering) and 500 too once the limiter is shutting down,
// while /readyz still answers 200.
func TestHealthcheck(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	shuttingDown := func(c *httpapi.Config) { c.ShuttingDown = closed }
	tests := []struct {
		name   string
		f      *fixture
		method string
		code   int
		body   string // the whole body
		readyz int
	}{
		{"ready", newFixture(t, rulesYAML), http.MethodGet, http.StatusOK, "OK", http.StatusOK},
		{"ready, HEAD", newFixture(t, rulesYAML), http.MethodHead, http.StatusOK, "", http.StatusOK},
		{"no rules loaded", newFixture(t, ""), http.MethodGet, http.StatusInternalServerError, "limiter: no rules loaded\n", http.StatusServiceUnavailable},
		{"shutting down", newFixture(t, rulesYAML, shuttingDown), http.MethodGet, http.StatusInternalServerError, "shutting down\n", http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.f.do(t, tt.method, "/healthcheck", "", "")
			if r.code != tt.code || string(r.body) != tt.body {
				t.Errorf("got %d %q, want %d %q", r.code, r.body, tt.code, tt.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type: got %q, want text/plain; charset=utf-8", ct)
			}
			if r := tt.f.get(t, "/readyz"); r.code != tt.readyz {
				t.Errorf("/readyz: got %d %s, want %d", r.code, r.body, tt.readyz)
			}
		})
	}
}

// TestEmptyRules checks that a limiter whose rules are loaded and hold no
// rule answers every check allowed with no rule matched, and says so on
// /readyz; only one that never loaded rules is unavailable.
func TestEmptyRules(t *testing.T) {
	f := newFixture(t, "")
	if r := f.get(t, "/readyz"); r.code != http.StatusServiceUnavailable || !strings.Contains(string(r.body), `"rules":"not_loaded"`) {
		t.Fatalf("readyz before rules: got %d %s, want 503 with rules not_loaded", r.code, r.body)
	}
	if err := f.lim.SetRules(); err != nil {
		t.Fatal(err)
	}
	if r := f.get(t, "/readyz"); r.code != http.StatusOK || !strings.Contains(string(r.body), `"rules":"empty","domains":0,"rule_count":0`) {
		t.Fatalf("readyz with no rule: got %d %s, want 200 with rules empty", r.code, r.body)
	}
	for _, body := range []string{`{"attributes":{"user_id":"a"}}`, `{"clientId":"x"}`} {
		r := f.post(t, "/v1/check", body)
		var got httpapi.CheckResponse
		decode(t, r, &got)
		if r.code != http.StatusOK || !got.Allowed || got.Matched {
			t.Errorf("check %s with no rule: got %d %s, want 200 allowed, matched false", body, r.code, r.body)
		}
	}
	// A rule file names its domain: another is still an error.
	if r := f.post(t, "/v1/check", `{"domain":"other","clientId":"x"}`); r.code != http.StatusBadRequest {
		t.Errorf("unknown domain with no rule loaded: got %d %s, want 400", r.code, r.body)
	}
	if r := f.get(t, "/v1/rate-limits/login/john"); r.code != http.StatusNotFound {
		t.Errorf("status with no rule: got %d %s, want 404", r.code, r.body)
	}
}

// TestInvalidUTF8 checks that attribute names and values that are not
// valid UTF-8 are refused with their field path, rather than turned into
// U+FFFD, which would make distinct keys share one counter.
func TestInvalidUTF8(t *testing.T) {
	f := newFixture(t, rulesYAML)
	tests := []struct {
		name, body, want string
	}{
		{"value \\xff", "{\"attributes\":{\"user_id\":\"a\xff\"}}", "attributes.user_id: value is not valid UTF-8"},
		{"value \\xfe", "{\"attributes\":{\"user_id\":\"a\xfe\"}}", "attributes.user_id: value is not valid UTF-8"},
		{"value \\x80", "{\"attributes\":{\"user_id\":\"\x80\"}}", "attributes.user_id: value is not valid UTF-8"},
		{"value \\xc0", "{\"attributes\":{\"user_id\":\"\xc0\"}}", "attributes.user_id: value is not valid UTF-8"},
		{"name", "{\"attributes\":{\"us\xffer\":\"a\"}}", `attributes: name "us\xffer" is not valid UTF-8`},
		{"descriptor value", "{\"descriptors\":[{\"key\":\"user_id\",\"value\":\"ok\"},{\"key\":\"tenant\",\"value\":\"\xff\"}]}", "descriptors[1].value: value is not valid UTF-8"},
		{"clientId", "{\"clientId\":\"\xff\"}", "clientId: value is not valid UTF-8"},
		{"domain", "{\"domain\":\"\xff\"}", "domain: value is not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.post(t, "/v1/check", tt.body)
			wantBadRequest(t, r, http.StatusBadRequest)
			var e struct{ Error, Message string }
			decode(t, r, &e)
			if e.Message != tt.want {
				t.Errorf("message: got %q, want %q", e.Message, tt.want)
			}
		})
	}
	// Valid UTF-8, U+FFFD itself included, passes.
	for _, body := range []string{`{"attributes":{"user_id":"\ufffd"}}`, "{\"attributes\":{\"user_id\":\"\xef\xbf\xbd é\"}}"} {
		if r := f.post(t, "/v1/check", body); r.code != http.StatusOK {
			t.Errorf("%q: got %d %s, want 200", body, r.code, r.body)
		}
	}
}

// TestLoneSurrogates checks that an escape of a lone UTF-16 surrogate in
// a name or value (\ud800 to \udfff, not as a pair) is refused with its
// field path, on both endpoints that read JSON, rather than read as
// U+FFFD, which would make "zz\ud800", "zz\udc00" and "zz\ufffd" share one
// counter; U+FFFD itself, written or escaped, and surrogate pairs pass.
func TestLoneSurrogates(t *testing.T) {
	f := newFixture(t, rulesYAML)
	const lone = "a lone surrogate, not a character"
	tests := []struct {
		name, path, body, want string
	}{
		{"high", "/v1/check", `{"attributes":{"user_id":"zz\ud800"}}`, `attributes.user_id: value has the escape \ud800, ` + lone},
		{"low", "/v1/check", `{"attributes":{"user_id":"zz\udc00"}}`, `attributes.user_id: value has the escape \udc00, ` + lone},
		{"last", "/v1/check", `{"attributes":{"user_id":"\udfff"}}`, `attributes.user_id: value has the escape \udfff, ` + lone},
		{"upper case", "/v1/check", `{"attributes":{"user_id":"\uD800x"}}`, `attributes.user_id: value has the escape \uD800, ` + lone},
		{"high before a letter", "/v1/check", `{"attributes":{"user_id":"\ud800\u0041"}}`, `attributes.user_id: value has the escape \ud800, ` + lone},
		{"pair reversed", "/v1/check", `{"attributes":{"user_id":"\udc00\ud800"}}`, `attributes.user_id: value has the escape \udc00, ` + lone},
		{"after a pair", "/v1/check", `{"attributes":{"user_id":"\ud83d\ude00\ud83d"}}`, `attributes.user_id: value has the escape \ud83d, ` + lone},
		{"name", "/v1/check", `{"attributes":{"zz\ud800":"v"}}`, `attributes: name "zz\\ud800" has the escape \ud800, ` + lone},
		{"descriptor value", "/v1/check", `{"descriptors":[{"key":"user_id","value":"ok"},{"key":"tenant","value":"\udbff"}]}`, `descriptors[1].value: value has the escape \udbff, ` + lone},
		{"clientId", "/v1/check", `{"clientId":"\ud800"}`, `clientId: value has the escape \ud800, ` + lone},
		{"domain", "/v1/check", `{"domain":"\ud800","clientId":"x"}`, `domain: value has the escape \ud800, ` + lone},
		{"seed clientId", "/shouldAllowRequest", `{"clientId":"\udfff"}`, `clientId: value has the escape \udfff, ` + lone},
		{"seed timestamp", "/shouldAllowRequest", `{"clientId":"x","timestamp":"\udfff"}`, `timestamp: value has the escape \udfff, ` + lone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.post(t, tt.path, tt.body)
			wantBadRequest(t, r, http.StatusBadRequest)
			var e struct{ Error, Message string }
			decode(t, r, &e)
			if e.Error != "INVALID_REQUEST" || e.Message != tt.want {
				t.Errorf("got %s %q, want INVALID_REQUEST %q", e.Error, e.Message, tt.want)
			}
		})
	}
	// U+FFFD, written or escaped, a pair, an escaped backslash before
	// "ud800" and other escapes are characters: each its own key (the
	// tenant rule's limit is 3: each is allowed with 2 left).
	for _, value := range []string{`zz\ufffd`, "yy\xef\xbf\xbd", `zz\ud83d\ude00`, `zz\\ud800`, `zz\u00e9`} {
		r := f.post(t, "/v1/check", `{"attributes":{"tenant":"`+value+`","user_id":"u"}}`)
		if r.code != http.StatusOK {
			t.Fatalf("%s: got %d %s, want 200", value, r.code, r.body)
		}
		var resp httpapi.CheckResponse
		decode(t, r, &resp)
		i := slices.IndexFunc(resp.Results, func(rr httpapi.RuleResult) bool { return rr.RuleID == "tenant-user" })
		if i < 0 || resp.Results[i].Remaining == nil || *resp.Results[i].Remaining != 2 {
			t.Errorf("%s: got %s, want tenant-user with 2 remaining (a key of its own)", value, r.body)
		}
	}
}

// TestNull checks that null where a string, an integer, an object or a
// list is wanted is refused with the field path, on both endpoints that
// read JSON, rather than taken as the field left out: {"tenant": null}
// would be allowed, no rule matching, and "hits": null taken as 1.
func TestNull(t *testing.T) {
	f := newFixture(t, rulesYAML)
	const instead = "; leave the field out instead"
	tests := []struct {
		name, path, body, want string
	}{
		{"attribute value", "/v1/check", `{"attributes":{"tenant":null}}`, "attributes.tenant: want a string, got null" + instead},
		{"hits", "/v1/check", `{"clientId":"x","hits":null}`, "hits: want an integer, got null" + instead},
		{"attributes", "/v1/check", `{"clientId":"x","attributes":null}`, "attributes: want an object, got null" + instead},
		{"descriptors", "/v1/check", `{"clientId":"x","descriptors":null}`, "descriptors: want a list, got null" + instead},
		{"descriptor", "/v1/check", `{"clientId":"x","descriptors":[null]}`, "descriptors[0]: want an object, got null" + instead},
		{"descriptor value", "/v1/check", `{"descriptors":[{"key":"tenant","value":null}]}`, "descriptors[0].value: want a string, got null" + instead},
		{"domain", "/v1/check", `{"domain":null,"clientId":"x"}`, "domain: want a string, got null" + instead},
		{"clientId", "/v1/check", `{"clientId":null,"attributes":{"user_id":"u"}}`, "clientId: want a string, got null" + instead},
		{"seed timestamp", "/shouldAllowRequest", `{"clientId":"x","timestamp":null}`, "timestamp: want a string, got null" + instead},
		{"seed clientId", "/shouldAllowRequest", `{"clientId":null}`, "clientId: want a string, got null" + instead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.post(t, tt.path, tt.body)
			wantBadRequest(t, r, http.StatusBadRequest)
			var e struct{ Error, Message string }
			decode(t, r, &e)
			if e.Error != "INVALID_REQUEST" || e.Message != tt.want {
				t.Errorf("got %s %q, want INVALID_REQUEST %q", e.Error, e.Message, tt.want)
			}
		})
	}
	// The text "null" is a string like any other.
	if r := f.post(t, "/v1/check", `{"attributes":{"tenant":"null","user_id":"null"}}`); r.code != http.StatusOK {
		t.Errorf(`"null" as a value: got %d %s, want 200`, r.code, r.body)
	}
}

// TestRepeatedKeys checks that a body repeating a key at any level, or
// naming a field in another case than its own, is refused with the path of
// each, on both endpoints that read JSON, rather than decided on the last
// value or a case-insensitive match, which a proxy reading the first
// value or the exact name would not agree with.
func TestRepeatedKeys(t *testing.T) {
	f := newFixture(t, rulesYAML)
	tests := []struct {
		name, path, body, want string
	}{
		{"attribute", "/v1/check", `{"attributes":{"user_id":"a","user_id":"b"}}`, "attributes.user_id: appears more than once"},
		{"hits", "/v1/check", `{"attributes":{"account":"x"},"hits":1,"hits":500}`, "hits: appears more than once"},
		{"domain", "/v1/check", `{"domain":"other","domain":"shop","clientId":"x"}`, "domain: appears more than once"},
		{"attributes object", "/v1/check", `{"attributes":{"ip":"1"},"attributes":{"ip":"2"}}`, "attributes: appears more than once"},
		{"descriptor", "/v1/check", `{"descriptors":[{"key":"ip","value":"1"},{"key":"user_id","value":"a","value":"b"}]}`, "descriptors[1].value: appears more than once"},
		{"escaped", "/v1/check", `{"attributes":{"user_id":"a","user_id":"b"}}`, "attributes.user_id: appears more than once"},
		{"odd name", "/v1/check", `{"attributes":{"x.y":"a","x.y":"b"}}`, `attributes["x.y"]: appears more than once`},
		{"several", "/v1/check", `{"hits":1,"attributes":{"ip":"1","ip":"1"},"hits":1}`, "hits: appears more than once; attributes.ip: appears more than once"},
		{"seed clientId", "/shouldAllowRequest", `{"clientId":"a","clientId":"b"}`, "clientId: appears more than once"},
		{"seed timestamp", "/shouldAllowRequest", `{"clientId":"a","timestamp":"2026-11-22T12:00:00Z","timestamp":"2026-11-22T12:00:00Z"}`, "timestamp: appears more than once"},
		{"hits in capitals", "/v1/check", `{"attributes":{"account":"x"},"HITS":500}`, `HITS: unknown field; names are case-sensitive: want "hits"`},
		{"hits beside its capitals", "/v1/check", `{"attributes":{"account":"x"},"hits":1,"Hits":500}`, `Hits: unknown field; names are case-sensitive: want "hits"`},
		{"attributes in capitals", "/v1/check", `{"attributes":{"account":"x"},"Attributes":{"account":"y"}}`, `Attributes: unknown field; names are case-sensitive: want "attributes"`},
		{"descriptor key", "/v1/check", `{"descriptors":[{"Key":"account","value":"x"}]}`, `descriptors[0].Key: unknown field; names are case-sensitive: want "key"`},
		{"clientId", "/v1/check", `{"clientid":"x"}`, `clientid: unknown field; names are case-sensitive: want "clientId"`},
		{"repeat and case", "/v1/check", `{"hits":1,"hits":2,"DOMAIN":"shop"}`, `hits: appears more than once; DOMAIN: unknown field; names are case-sensitive: want "domain"`},
		{"seed clientId case", "/shouldAllowRequest", `{"ClientId":"a"}`, `ClientId: unknown field; names are case-sensitive: want "clientId"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.post(t, tt.path, tt.body)
			wantBadRequest(t, r, http.StatusBadRequest)
			var e struct{ Error, Message string }
			decode(t, r, &e)
			if e.Error != "INVALID_REQUEST" || e.Message != tt.want {
				t.Errorf("got %s %q, want INVALID_REQUEST %q", e.Error, e.Message, tt.want)
			}
		})
	}
	// Nothing was charged: the account's first check finds its whole limit.
	r := f.post(t, "/v1/check", `{"attributes":{"account":"x"}}`)
	var resp httpapi.CheckResponse
	decode(t, r, &resp)
	if r.code != http.StatusOK || resp.Remaining == nil || *resp.Remaining != 4 {
		t.Errorf("account x after the refused bodies: got %d %s, want 200 with 4 remaining", r.code, r.body)
	}
	// Many repeats: the first ten are listed.
	var b strings.Builder
	b.WriteString(`{"attributes":{"k":"v"`)
	for range 12 {
		b.WriteString(`,"k":"v"`)
	}
	b.WriteString(`}}`)
	r = f.post(t, "/v1/check", b.String())
	wantBadRequest(t, r, http.StatusBadRequest)
	var e struct{ Error, Message string }
	decode(t, r, &e)
	want := strings.Repeat("attributes.k: appears more than once; ", 10) + "and 2 more mistakes in keys"
	if e.Message != want {
		t.Errorf("12 repeats: got %q, want %q", e.Message, want)
	}
	// The same name at different places, or in different case, is no
	// repeat.
	for _, body := range []string{`{"attributes":{"user_id":"a","User_id":"b"},"descriptors":[{"key":"ip","value":"1"},{"key":"path","value":"/"}]}`} {
		if r := f.post(t, "/v1/check", body); r.code != http.StatusOK {
			t.Errorf("%s: got %d %s, want 200", body, r.code, r.body)
		}
	}
}

func TestSeveralDomains(t *testing.T) {
	f := newFixture(t, "")
	other := strings.Replace(rulesYAML, "domain: shop", "domain: blog", 1)
	if err := f.lim.SetRules(compile(t, rulesYAML), compile(t, other)); err != nil {
		t.Fatal(err)
	}
	wantBadRequest(t, f.post(t, "/v1/check", `{"clientId":"x"}`), http.StatusBadRequest)
	wantBadRequest(t, f.post(t, "/shouldAllowRequest", `{"clientId":"x"}`), http.StatusBadRequest)
	for _, d := range []string{"shop", "blog"} {
		if r := f.post(t, "/v1/check", `{"domain":"`+d+`","clientId":"x"}`); r.code != http.StatusOK {
			t.Errorf("domain %s: got %d, want 200", d, r.code)
		}
	}
}

// TestShouldAllowRequestDomain checks that seed 000's endpoint can name a
// rule domain, by ?domain= or a "domain" field, so that a second domain
// loaded beside the one it uses does not refuse its requests, and that a
// limiter with a default domain answers the seed's body unchanged.
func TestShouldAllowRequestDomain(t *testing.T) {
	other := strings.Replace(rulesYAML, "domain: shop", "domain: blog", 1)
	tests := []struct {
		name          string
		defaultDomain string
		path, body    string
		code          int
		want          string // the whole body, for a 200
	}{
		{"no domain named", "", "/shouldAllowRequest", `{"clientId":"123"}`, http.StatusBadRequest, ""},
		{"domain in the query", "", "/shouldAllowRequest?domain=shop", `{"clientId":"123"}`, http.StatusOK, `{"allowed":false}`},
		{"domain in the body", "", "/shouldAllowRequest", `{"clientId":"123","domain":"shop"}`, http.StatusOK, `{"allowed":false}`},
		{"other domain in the body", "", "/shouldAllowRequest", `{"clientId":"123","domain":"blog"}`, http.StatusOK, `{"allowed":true}`},
		{"query and body agree", "", "/shouldAllowRequest?domain=shop", `{"clientId":"123","domain":"shop"}`, http.StatusOK, `{"allowed":false}`},
		{"query and body disagree", "", "/shouldAllowRequest?domain=blog", `{"clientId":"123","domain":"shop"}`, http.StatusBadRequest, ""},
		{"unknown domain", "", "/shouldAllowRequest?domain=nope", `{"clientId":"123"}`, http.StatusBadRequest, ""},
		{"default domain", "shop", "/shouldAllowRequest", `{"clientId":"123","timestamp":"2026-11-22T12:00:00Z"}`, http.StatusOK, `{"allowed":false}`},
		{"default domain, another named", "shop", "/shouldAllowRequest?domain=blog", `{"clientId":"123"}`, http.StatusOK, `{"allowed":true}`},
		{"default domain, check API", "shop", "/v1/check", `{"clientId":"123"}`, http.StatusTooManyRequests, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, err := memstore.New(memstore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			c := fakeclock.New(t0)
			lim, err := limiter.New(limiter.Config{Store: store, Now: c.Now, CacheKeys: -1, DefaultDomain: tt.defaultDomain})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(lim.Close)
			if err := lim.SetRules(compile(t, rulesYAML), compile(t, other)); err != nil {
				t.Fatal(err)
			}
			api, err := httpapi.New(httpapi.Config{Limiter: lim, Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(api)
			t.Cleanup(srv.Close)
			f := &fixture{lim: lim, clock: c, url: srv.URL}
			// Spend client 123's two requests a minute in shop.
			for range 2 {
				if r := f.post(t, "/v1/check", `{"domain":"shop","clientId":"123"}`); r.code != http.StatusOK {
					t.Fatalf("spending the quota: got %d, want 200 (%s)", r.code, r.body)
				}
			}
			r := f.post(t, tt.path, tt.body)
			if tt.code == http.StatusBadRequest {
				wantBadRequest(t, r, http.StatusBadRequest)
				return
			}
			if r.code != tt.code {
				t.Fatalf("status: got %d, want %d (%s)", r.code, tt.code, r.body)
			}
			if got := strings.TrimSpace(string(r.body)); tt.want != "" && got != tt.want {
				t.Errorf("body: got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	const maxBody = 8 << 10
	f := newFixture(t, rulesYAML, func(c *httpapi.Config) { c.MaxBody = maxBody })
	attrs := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"a%d":"v"`, i)
		}
		return b.String()
	}
	descs := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"key":"d%d","value":"v"}`, i)
		}
		return b.String()
	}
	tests := []struct {
		name        string
		contentType string
		body        string
		code        int
	}{
		{"oversized body", "application/json", `{"attributes":{"username":"` + strings.Repeat("x", maxBody) + `"}}`, http.StatusRequestEntityTooLarge},
		{"wrong content type", "text/plain", `{"clientId":"x"}`, http.StatusUnsupportedMediaType},
		// curl -d labels JSON as a form: tolerated, but the body must be JSON.
		{"form-encoded body", "application/x-www-form-urlencoded", `clientId=x`, http.StatusBadRequest},
		{"empty body", "application/json", ``, http.StatusBadRequest},
		{"blank body", "application/json", " \n\t", http.StatusBadRequest},
		{"null", "application/json", `null`, http.StatusBadRequest},
		{"array", "application/json", `[]`, http.StatusBadRequest},
		{"string", "application/json", `"clientId"`, http.StatusBadRequest},
		{"number", "application/json", `1`, http.StatusBadRequest},
		{"malformed", "application/json", `{"attributes":`, http.StatusBadRequest},
		{"missing comma", "application/json", `{"clientId":"x" "hits":1}`, http.StatusBadRequest},
		{"trailing object", "application/json", `{"clientId":"x"} {"clientId":"y"}`, http.StatusBadRequest},
		{"trailing garbage", "application/json", `{"clientId":"x"}x`, http.StatusBadRequest},
		{"trailing bracket", "application/json", `{"clientId":"x"}]`, http.StatusBadRequest},
		{"unknown field", "application/json", `{"atributes":{"ip":"192.0.2.1"}}`, http.StatusBadRequest},
		{"unknown descriptor field", "application/json", `{"descriptors":[{"key":"ip","value":"1","extra":1}]}`, http.StatusBadRequest},
		{"attribute value a number", "application/json", `{"attributes":{"ip":1}}`, http.StatusBadRequest},
		{"attribute value an object", "application/json", `{"attributes":{"ip":{}}}`, http.StatusBadRequest},
		{"attributes a list", "application/json", `{"attributes":["ip"]}`, http.StatusBadRequest},
		{"domain a number", "application/json", `{"domain":1,"clientId":"x"}`, http.StatusBadRequest},
		{"hits a string", "application/json", `{"clientId":"x","hits":"1"}`, http.StatusBadRequest},
		{"hits a fraction", "application/json", `{"clientId":"x","hits":1.5}`, http.StatusBadRequest},
		{"hits 0", "application/json", `{"clientId":"x","hits":0}`, http.StatusBadRequest},
		{"hits negative", "application/json", `{"clientId":"x","hits":-1}`, http.StatusBadRequest},
		{"hits over the maximum", "application/json", fmt.Sprintf(`{"clientId":"x","hits":%d}`, limiter.MaxHits+1), http.StatusBadRequest},
		{"hits beyond int64", "application/json", `{"clientId":"x","hits":99999999999999999999}`, http.StatusBadRequest},
		{"hits 1e30", "application/json", `{"clientId":"x","hits":1e30}`, http.StatusBadRequest},
		{"too many attributes", "application/json", `{"attributes":{` + attrs(limiter.MaxAttributes+1) + `}}`, http.StatusBadRequest},
		{"too many descriptors", "application/json", `{"descriptors":[` + descs(limiter.MaxAttributes+1) + `]}`, http.StatusBadRequest},
		{"too many attributes and descriptors together", "application/json", `{"attributes":{` + attrs(40) + `},"descriptors":[` + descs(40) + `]}`, http.StatusBadRequest},
		{"descriptor repeats an attribute", "application/json", `{"attributes":{"ip":"192.0.2.1"},"descriptors":[{"key":"ip","value":"192.0.2.2"}]}`, http.StatusBadRequest},
		{"descriptor without key", "application/json", `{"descriptors":[{"value":"v"}]}`, http.StatusBadRequest},
		{"clientId disagrees with client_id", "application/json", `{"clientId":"a","attributes":{"client_id":"b"}}`, http.StatusBadRequest},
		{"huge attribute value", "application/json", `{"attributes":{"username":"` + strings.Repeat("x", limiter.MaxValueLen+1) + `"}}`, http.StatusBadRequest},
		{"huge attribute name", "application/json", `{"attributes":{"` + strings.Repeat("n", limiter.MaxNameLen+1) + `":"v"}}`, http.StatusBadRequest},
		{"empty attribute name", "application/json", `{"attributes":{"":"v"}}`, http.StatusBadRequest},
		{"unknown domain", "application/json", `{"domain":"nope","clientId":"x"}`, http.StatusBadRequest},
		{"bad escape", "application/json", `{"clientId":"\x"}`, http.StatusBadRequest},
		{"control character in a string", "application/json", "{\"clientId\":\"a\x01b\"}", http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantBadRequest(t, f.do(t, http.MethodPost, "/v1/check", tt.contentType, tt.body), tt.code)
		})
	}
	// None of them spent anything: client x still has its whole quota.
	r := f.get(t, "/v1/rate-limits/seed/x")
	var st httpapi.StatusResponse
	decode(t, r, &st)
	if st.Remaining == nil || *st.Remaining != 2 {
		t.Errorf("seed/x after bad requests only: got remaining %v, want 2", st.Remaining)
	}

	accepted := []struct {
		name        string
		contentType string
	}{
		{"no content type", ""},
		{"charset", "application/json; charset=utf-8"},
		{"upper case", "Application/JSON"},
	}
	for _, tt := range accepted {
		t.Run("accepts "+tt.name, func(t *testing.T) {
			if r := f.do(t, http.MethodPost, "/v1/check", tt.contentType, `{"attributes":{"nothing":"here"}}`); r.code != http.StatusOK {
				t.Fatalf("got %d, want 200 (%s)", r.code, r.body)
			}
		})
	}
	if r := f.get(t, "/v1/check"); r.code != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/check: got %d, want 405", r.code)
	}
}

// TestMethodNotAllowed: a method a route does not take gets a JSON 405,
// as every error of the API, with an Allow header naming those it takes;
// Envoy's /json keeps ServeMux's plain-text 405, as every error of that
// endpoint is plain text (envoyproxy/ratelimit's).
func TestMethodNotAllowed(t *testing.T) {
	f := newFixture(t, rulesYAML, func(c *httpapi.Config) {
		c.Envoy = envoyrls.JSONHandler(envoyrls.NewService(c.Limiter, envoyrls.Config{}))
	})
	for _, tt := range []struct {
		method, path, allow string
	}{
		{http.MethodGet, "/v1/check", "POST"},
		{http.MethodPut, "/v1/check", "POST"},
		{http.MethodGet, "/shouldAllowRequest", "POST"},
		{http.MethodPost, "/v1/rate-limits/login/john", "GET, HEAD"},
		{http.MethodDelete, "/v1/rate-limits/login/a/b", "GET, HEAD"},
		{http.MethodPost, "/healthz", "GET, HEAD"},
		{http.MethodOptions, "/readyz", "GET, HEAD"},
		{http.MethodPost, "/metrics", "GET, HEAD"},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := f.do(t, tt.method, tt.path, "", "")
			wantBadRequest(t, r, http.StatusMethodNotAllowed)
			if got := r.header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow: got %q, want %q", got, tt.allow)
			}
			var e struct{ Error, Message string }
			decode(t, r, &e)
			if want := "method " + tt.method + ": want " + tt.allow; e.Error != "METHOD_NOT_ALLOWED" || e.Message != want {
				t.Errorf("got %s %q, want METHOD_NOT_ALLOWED %q", e.Error, e.Message, want)
			}
		})
	}
	// HEAD gets the status and headers, without a body.
	if r := f.do(t, http.MethodHead, "/v1/check", "", ""); r.code != http.StatusMethodNotAllowed || r.header.Get("Allow") != "POST" {
		t.Errorf("HEAD /v1/check: got %d Allow %q, want 405 Allow POST", r.code, r.header.Get("Allow"))
	}
	// The routes still take their own methods.
	if r := f.get(t, "/healthz"); r.code != http.StatusOK {
		t.Errorf("GET /healthz: got %d, want 200", r.code)
	}
	if r := f.do(t, http.MethodHead, "/readyz", "", ""); r.code != http.StatusOK {
		t.Errorf("HEAD /readyz: got %d, want 200", r.code)
	}
	r := f.get(t, "/json")
	if ct := r.header.Get("Content-Type"); r.code != http.StatusMethodNotAllowed || ct != "text/plain; charset=utf-8" || r.header.Get("Allow") != "POST" {
		t.Errorf("GET /json: got %d %q Allow %q, want ServeMux's plain-text 405, Allow POST", r.code, ct, r.header.Get("Allow"))
	}
	// A path the API does not serve: a JSON 404.
	for _, path := range []string{"/", "/v1/chek", "/v1/check/extra", "/jsonx"} {
		r := f.do(t, http.MethodPost, path, "", "")
		var e struct{ Error, Message string }
		if r.code != http.StatusNotFound {
			t.Errorf("POST %s: got %d, want 404", path, r.code)
			continue
		}
		decode(t, r, &e)
		if e.Error != "NOT_FOUND" || e.Message != "no such path: "+path {
			t.Errorf("POST %s: got %s %q, want NOT_FOUND naming the path", path, e.Error, e.Message)
		}
	}
}

// TestCurlDefaultContentType: curl -d sends a JSON body labelled as a form;
// it is decided like application/json.
func TestCurlDefaultContentType(t *testing.T) {
	store, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.New(limiter.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	set, err := rulefile.Parse([]byte("domain: d\nrules:\n  - {rule_id: r, key_type: client_id, limit: 1, window_seconds: 60}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := ruleset.Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	if err := lim.SetRules(cs); err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.New(httpapi.Config{Limiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		req := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(`{"clientId":"c"}`))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Fatalf("got %d %s, want %d", rec.Code, rec.Body, want)
		}
	}
}
