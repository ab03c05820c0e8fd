package httplimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/weirhq/weir/internal/testkit/deadpeer"
	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/internal/testkit/limitertest"
	"github.com/weirhq/weir/internal/testkit/syncbuf"
	"github.com/weirhq/weir/pkg/client"
	"github.com/weirhq/weir/pkg/httplimit"
	"github.com/weirhq/weir/pkg/limiter"
)

const rulesYAML = `
domain: web
rules:
  - rule_id: per-ip
    path_pattern: /api/**
    key_type: ip
    limit: 2
    window_seconds: 60
    algorithm: FixedWindow
  - rule_id: per-user
    path_pattern: /users/**
    key_type: user_id
    limit: 1
    window_seconds: 60
    algorithm: FixedWindow
    rejection_message: One per minute, please.
  - rule_id: health
    path_pattern: /health
    unlimited: true
`

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func newLimiter(t testing.TB, rules string) *limiter.Limiter {
	t.Helper()
	return limitertest.New(t, rules, func() time.Time { return t0 })
}

// checkers are the checkers the middleware must work alike with: an
// in-process limiter, and a client of a remote limiter over weir.v1 (the
// same rules and clock behind a gRPC server). Each test below runs
// against both; rules "" loads none.
var checkers = []struct {
	name string
	new  func(t *testing.T, rules string) httplimit.Checker
	// unreachable returns a checker whose limiter is out of reach.
	unreachable func(t *testing.T) httplimit.Checker
}{
	{
		name:        "in-process",
		new:         func(t *testing.T, rules string) httplimit.Checker { return newLimiter(t, rules) },
		unreachable: func(*testing.T) httplimit.Checker { return failing{} },
	},
	{
		name: "remote",
		new: func(t *testing.T, rules string) httplimit.Checker {
			return newClient(t, limitertest.Serve(t, limitertest.New(t, rules, func() time.Time { return t0 })))
		},
		unreachable: func(t *testing.T) httplimit.Checker { return newClient(t, deadpeer.Addr(t)) },
	},
	{
		name: "remote batched",
		new: func(t *testing.T, rules string) httplimit.Checker {
			return newClient(t, limitertest.Serve(t, limitertest.New(t, rules, func() time.Time { return t0 })), time.Millisecond)
		},
		unreachable: func(t *testing.T) httplimit.Checker { return newClient(t, deadpeer.Addr(t), time.Millisecond) },
	},
}

// newClient returns a client of the limiter at addr that leaves failures
// to the middleware's OnError, batching with linger when one is given.
func newClient(t *testing.T, addr string, linger ...time.Duration) *client.Client {
	t.Helper()
	cfg := client.Config{Addrs: []string{addr}, Timeout: 5 * time.Second, Policy: client.Policy{OnFailure: client.Fail}}
	if len(linger) > 0 {
		cfg.Linger = linger[0]
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// upstream counts the requests it served.
type upstream struct{ served int }

func (u *upstream) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	u.served++
	_, _ = w.Write([]byte("upstream"))
}

type call struct {
	method, path, peer string
	header             map[string]string
	wantCode           int
	wantServed         bool
	wantHeader         map[string]string // "" means absent
	wantBody           string            // a substring
}

func run(t *testing.T, h http.Handler, up *upstream, calls []call) {
	t.Helper()
	for i, c := range calls {
		r := httptest.NewRequest(c.method, c.path, nil)
		r.RemoteAddr = c.peer
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		before := up.served
		h.ServeHTTP(w, r)
		if w.Code != c.wantCode || (up.served > before) != c.wantServed {
			t.Fatalf("call %d %s %s: got %d served=%v %q, want %d served=%v", i, c.method, c.path, w.Code, up.served > before, w.Body.String(), c.wantCode, c.wantServed)
		}
		for k, v := range c.wantHeader {
			if got := w.Header().Get(k); got != v {
				t.Errorf("call %d %s: header %s = %q, want %q", i, c.path, k, got, v)
			}
		}
		if !strings.Contains(w.Body.String(), c.wantBody) {
			t.Errorf("call %d %s: body %q, want it to contain %q", i, c.path, w.Body.String(), c.wantBody)
		}
	}
}

func TestMiddleware(t *testing.T) {
	for _, ck := range checkers {
		t.Run(ck.name, func(t *testing.T) { testMiddleware(t, ck.new(t, rulesYAML)) })
	}
}

func testMiddleware(t *testing.T, lim httplimit.Checker) {
	up := &upstream{}
	m, err := httplimit.New(httplimit.Config{
		Checker: lim, Headers: map[string]string{"x-user-id": "user_id"},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Now:            func() time.Time { return t0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Wrap(up)
	reset := strconv.FormatInt(t0.Add(time.Minute).Unix(), 10)
	run(t, h, up, []call{
		{"GET", "/api/a", "192.0.2.1:5000", nil, 200, true, map[string]string{
			"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": reset,
			"RateLimit-Policy": `"per-ip";q=2;w=60`, "RateLimit": `"per-ip";r=1;t=60`, "Retry-After": ""}, "upstream"},
		{"POST", "/api/b", "192.0.2.1:5001", nil, 200, true, map[string]string{"X-RateLimit-Remaining": "0"}, "upstream"},
		{"GET", "/api/a", "192.0.2.1:5000", nil, 429, false, map[string]string{
			"Retry-After": "60", "X-RateLimit-Remaining": "0", "Content-Type": "application/json"},
			`{"error":"RATE_LIMIT_EXCEEDED","message":"Rate limit exceeded. Please try again in 60 seconds.","retry_after":60}`},
		// Another client IP has its own count.
		{"GET", "/api/a", "192.0.2.2:5000", nil, 200, true, nil, "upstream"},
		// X-Forwarded-For from an untrusted peer is ignored: still 192.0.2.1.
		{"GET", "/api/a", "192.0.2.1:5000", map[string]string{"X-Forwarded-For": "198.51.100.7"}, 429, false, nil, "RATE_LIMIT_EXCEEDED"},
		// From a trusted proxy, the rightmost untrusted hop is the client.
		{"GET", "/api/a", "10.1.2.3:80", map[string]string{"X-Forwarded-For": "192.0.2.1, 198.51.100.7, 10.9.9.9"}, 200, true, nil, "upstream"},
		{"GET", "/api/a", "10.1.2.3:80", map[string]string{"X-Forwarded-For": "198.51.100.7"}, 200, true, map[string]string{"X-RateLimit-Remaining": "0"}, "upstream"},
		// A malformed hop ends the trust: the proxy itself is the client.
		{"GET", "/api/a", "10.1.2.3:80", map[string]string{"X-Forwarded-For": "not-an-ip"}, 200, true, map[string]string{"X-RateLimit-Remaining": "1"}, "upstream"},
		// Header attributes: one per user; the rule's own message.
		{"GET", "/users/me", "192.0.2.1:5000", map[string]string{"X-User-Id": "alice"}, 200, true, nil, "upstream"},
		{"GET", "/users/me", "192.0.2.1:5000", map[string]string{"X-User-Id": "alice"}, 429, false, nil, `"message":"One per minute, please."`},
		{"GET", "/users/me", "192.0.2.1:5000", map[string]string{"X-User-Id": "bob"}, 200, true, nil, "upstream"},
		// Without the header the rule does not apply.
		{"GET", "/users/me", "192.0.2.1:5000", nil, 200, true, map[string]string{"X-RateLimit-Limit": ""}, "upstream"},
		// Unlimited and unmatched: passed on, no fields.
		{"GET", "/health", "192.0.2.1:5000", nil, 200, true, map[string]string{"X-RateLimit-Limit": "", "RateLimit": ""}, "upstream"},
		{"GET", "/other", "192.0.2.1:5000", nil, 200, true, map[string]string{"X-RateLimit-Limit": ""}, "upstream"},
		// A header too large for an attribute is a bad request, not a pass.
		{"GET", "/users/me", "192.0.2.1:5000", map[string]string{"X-User-Id": strings.Repeat("x", limiter.MaxValueLen+1)}, 400, false, nil, `"error":"INVALID_REQUEST"`},
	})
}

// TestNotUTF8 sends requests whose path or header cannot be an attribute
// (not valid UTF-8): each is a bad request, answered 400 and never passed
// on unchecked, with any checker, and however often it is sent.
func TestNotUTF8(t *testing.T) {
	for _, ck := range checkers {
		t.Run(ck.name, func(t *testing.T) {
			lim := ck.new(t, rulesYAML)
			for _, onError := range []httplimit.OnError{httplimit.Allow, httplimit.Reject} {
				m, err := httplimit.New(httplimit.Config{Checker: lim, Headers: map[string]string{"X-User-Id": "user_id"}, OnError: onError})
				if err != nil {
					t.Fatal(err)
				}
				up := &upstream{}
				bad := func(path string, header map[string]string, want string) []call {
					c := call{"GET", path, "192.0.2.9:1", header, 400, false, nil, want}
					return []call{c, c, c, c} // past the limits of 1 and 2
				}
				for _, tc := range []struct {
					name  string
					calls []call
				}{
					{"path /%FF", bad("/api/%FF", nil, `"path is not valid UTF-8"`)},
					{"path with a lone surrogate", bad("/users/%ED%A0%80", map[string]string{"X-User-Id": "eve"}, `"path is not valid UTF-8"`)},
					{"header value", bad("/users/me", map[string]string{"X-User-Id": "mallory\xff"}, `"header X-User-Id is not valid UTF-8"`)},
				} {
					t.Run(fmt.Sprintf("%s/%v", tc.name, onError), func(t *testing.T) { run(t, m.Wrap(up), up, tc.calls) })
				}
			}
		})
	}
}

// hung is a checker that answers only when the caller gives up, as a
// limiter whose store stalls does.
type hung struct{}

func (hung) Check(ctx context.Context, _ limiter.Request) (limiter.Response, error) {
	<-ctx.Done()
	return limiter.Response{}, ctx.Err()
}

// TestRequestContextEnds: a request whose context reaches its deadline
// during the check (a timeout middleware in front) could not be checked,
// and OnError answers it; one whose context is cancelled (the client went
// away) is answered nothing and not passed on.
func TestRequestContextEnds(t *testing.T) {
	stalled := func(t *testing.T) string {
		return limitertest.Serve(t, limitertest.New(t, rulesYAML, nil), grpc.UnaryInterceptor(
			func(ctx context.Context, _ any, _ *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}))
	}
	for _, ck := range []struct {
		name string
		new  func(t *testing.T) httplimit.Checker
	}{
		{"in-process", func(*testing.T) httplimit.Checker { return hung{} }},
		{"remote", func(t *testing.T) httplimit.Checker { return newClient(t, stalled(t)) }},
		{"remote batched", func(t *testing.T) httplimit.Checker { return newClient(t, stalled(t), time.Millisecond) }},
	} {
		checker := ck.new(t)
		for _, tc := range []struct {
			name      string
			onError   httplimit.OnError
			cancel    bool
			wantCode  int
			wantServe bool
			wantBody  string
		}{
			{"deadline, allow", httplimit.Allow, false, 200, true, "upstream"},
			{"deadline, reject", httplimit.Reject, false, 503, false, `"error":"UNAVAILABLE"`},
			{"cancelled, allow", httplimit.Allow, true, 200, false, ""},
			{"cancelled, reject", httplimit.Reject, true, 200, false, ""},
		} {
			t.Run(ck.name+"/"+tc.name, func(t *testing.T) {
				m, err := httplimit.New(httplimit.Config{Checker: checker, OnError: tc.onError, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					t.Fatal(err)
				}
				up := &upstream{}
				rctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				if tc.cancel {
					time.AfterFunc(20*time.Millisecond, cancel)
				}
				r := httptest.NewRequest("GET", "/api/a", nil).WithContext(rctx)
				w := httptest.NewRecorder()
				m.Wrap(up).ServeHTTP(w, r)
				// A recorder nothing was written to reports 200 and no body.
				if w.Code != tc.wantCode || (up.served > 0) != tc.wantServe || !strings.Contains(w.Body.String(), tc.wantBody) || (tc.wantBody == "" && w.Body.Len() > 0) {
					t.Errorf("got %d served=%v %q, want %d served=%v %q", w.Code, up.served > 0, w.Body.String(), tc.wantCode, tc.wantServe, tc.wantBody)
				}
			})
		}
	}
}

// TestFailureClosed: a rejection by a failure mode (here pkg/client's
// Policy Reject, the limiter out of reach) is a 429 with Retry-After and
// no quota fields: the quota is unknown, and a Limit of 0 or a window of
// 0 would be false.
func TestFailureClosed(t *testing.T) {
	noQuota := map[string]string{"X-RateLimit-Limit": "", "X-RateLimit-Remaining": "", "X-RateLimit-Reset": "", "RateLimit-Policy": "", "RateLimit": ""}
	for _, tc := range []struct {
		name           string
		retryAfter     time.Duration
		wantRetryAfter string
	}{
		{"default retry", 0, "1"},
		{"retry 2.5s", 2500 * time.Millisecond, "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(client.Config{Addrs: []string{deadpeer.Addr(t)}, Timeout: 50 * time.Millisecond,
				Policy: client.Policy{OnFailure: client.Reject, RetryAfter: tc.retryAfter}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			for _, onError := range []httplimit.OnError{httplimit.Allow, httplimit.Reject} {
				m, err := httplimit.New(httplimit.Config{Checker: c, OnError: onError})
				if err != nil {
					t.Fatal(err)
				}
				up := &upstream{}
				want := map[string]string{"Retry-After": tc.wantRetryAfter}
				for k, v := range noQuota {
					want[k] = v
				}
				run(t, m.Wrap(up), up, []call{{"GET", "/api/a", "192.0.2.1:1", nil, 429, false, want, `"error":"RATE_LIMIT_EXCEEDED"`}})
			}
		})
	}
}

// failing is a checker out of reach.
type failing struct{}

func (failing) Check(context.Context, limiter.Request) (limiter.Response, error) {
	return limiter.Response{}, errors.New("connection refused")
}

func TestOnError(t *testing.T) {
	for _, ck := range checkers {
		t.Run(ck.name, func(t *testing.T) { testOnError(t, ck.new, ck.unreachable) })
	}
}

func testOnError(t *testing.T, newChecker func(*testing.T, string) httplimit.Checker, unreachable func(*testing.T) httplimit.Checker) {
	for _, tc := range []struct {
		name     string
		checker  httplimit.Checker
		domain   string
		policy   httplimit.OnError
		wantCode int
		served   bool
	}{
		{"no rules loaded, allow", newChecker(t, ""), "", httplimit.Allow, 200, true},
		{"no rules loaded, reject", newChecker(t, ""), "", httplimit.Reject, 503, false},
		{"unknown domain, allow", newChecker(t, rulesYAML), "nope", httplimit.Allow, 200, true},
		{"unknown domain, reject", newChecker(t, rulesYAML), "nope", httplimit.Reject, 503, false},
		{"checker unreachable, allow", unreachable(t), "", httplimit.Allow, 200, true},
		{"checker unreachable, reject", unreachable(t), "", httplimit.Reject, 503, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := httplimit.New(httplimit.Config{Checker: tc.checker, Domain: tc.domain, OnError: tc.policy, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			up := &upstream{}
			want := "upstream"
			if !tc.served {
				want = `"error":"UNAVAILABLE"`
			}
			run(t, m.Wrap(up), up, []call{{"GET", "/api/a", "192.0.2.1:1", nil, tc.wantCode, tc.served, nil, want}})
		})
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	lim := newLimiter(t, rulesYAML)
	for _, tc := range []struct {
		name string
		cfg  httplimit.Config
		want string
	}{
		{"no checker", httplimit.Config{}, "Checker is required"},
		{"unknown policy", httplimit.Config{Checker: lim, OnError: 7}, "unknown OnError"},
		{"empty attribute", httplimit.Config{Checker: lim, Headers: map[string]string{"X-A": ""}}, "non-empty"},
		{"reserved attribute", httplimit.Config{Checker: lim, Headers: map[string]string{"X-Real-Ip": "ip"}}, "sets \"ip\" itself"},
		{"invalid prefix", httplimit.Config{Checker: lim, TrustedProxies: []netip.Prefix{{}}}, "invalid trusted proxy"},
	} {
		if _, err := httplimit.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := httplimit.ParseOnError("maybe"); err == nil {
		t.Error("ParseOnError(maybe): got nil error")
	}
}

// TestRejectionBodyIsJSON decodes the 429 body as a client would.
func TestRejectionBodyIsJSON(t *testing.T) {
	for _, ck := range checkers {
		t.Run(ck.name, func(t *testing.T) { testRejectionBodyIsJSON(t, ck.new(t, rulesYAML)) })
	}
}

func testRejectionBodyIsJSON(t *testing.T, checker httplimit.Checker) {
	m, err := httplimit.New(httplimit.Config{Checker: checker})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Wrap(&upstream{})
	var w *httptest.ResponseRecorder
	for range 3 {
		r := httptest.NewRequest("GET", "/api/x", nil)
		w = httptest.NewRecorder()
		h.ServeHTTP(w, r)
	}
	var body struct {
		Error      string `json:"error"`
		Message    string `json:"message"`
		RetryAfter int64  `json:"retry_after"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 429 || body.Error != "RATE_LIMIT_EXCEEDED" || body.RetryAfter < 1 || body.Message == "" {
		t.Fatalf("third request: %d %q (%v), want 429 with error, message and retry_after", w.Code, w.Body.String(), err)
	}
}

// answers holds a shadow rule tighter than the enforcing rule beside it,
// a deny override, and a one-second limit (for the message's plural).
const answers = `
domain: web
rules:
  - rule_id: trial
    path_pattern: /api/**
    key_type: ip
    limit: 1
    window_seconds: 60
    algorithm: FixedWindow
    shadow: true
  - rule_id: per-ip
    path_pattern: /api/**
    key_type: ip
    limit: 3
    window_seconds: 60
    algorithm: FixedWindow
    overrides:
      - {key: 192.0.2.66, action: deny}
  - rule_id: tick
    path_pattern: /tick
    key_type: ip
    limit: 1
    window_seconds: 1
    algorithm: FixedWindow
`

// TestAnswers checks that shadow rules shape no header, that a deny is a
// 403 with no retry promised, and that messages pluralise.
func TestAnswers(t *testing.T) {
	lim := newLimiter(t, answers)
	up := &upstream{}
	m, err := httplimit.New(httplimit.Config{Checker: lim, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	noLimit := map[string]string{"X-RateLimit-Limit": "", "X-RateLimit-Remaining": "", "RateLimit-Policy": "", "RateLimit": "", "Retry-After": ""}
	run(t, m.Wrap(up), up, []call{
		{"GET", "/api/a", "192.0.2.1:5000", nil, 200, true, map[string]string{
			"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "2", "RateLimit-Policy": `"per-ip";q=3;w=60`, "RateLimit": `"per-ip";r=2;t=60`}, "upstream"},
		// The shadow rule rejects now: nothing of it shows.
		{"GET", "/api/a", "192.0.2.1:5000", nil, 200, true, map[string]string{
			"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "1", "RateLimit-Policy": `"per-ip";q=3;w=60`, "RateLimit": `"per-ip";r=1;t=60`, "Retry-After": ""}, "upstream"},
		{"GET", "/api/a", "192.0.2.66:5000", nil, 403, false, noLimit,
			`{"error":"RATE_LIMIT_DENIED","message":"Access denied: rule \"per-ip\" denies this key."}`},
		{"GET", "/tick", "192.0.2.1:5000", nil, 200, true, nil, "upstream"},
		{"GET", "/tick", "192.0.2.1:5000", nil, 429, false, map[string]string{"Retry-After": "1"},
			`{"error":"RATE_LIMIT_EXCEEDED","message":"Rate limit exceeded. Please try again in 1 second.","retry_after":1}`},
	})
}

// TestCheckFailuresLoggedOncePerPeriod: while the limiter cannot decide
// (here it has no rules yet), every request fails its check; each is
// answered by OnError, and the log says so once per period with the
// count since, not once per request.
func TestCheckFailuresLoggedOncePerPeriod(t *testing.T) {
	clock := fakeclock.New(time.Time{})
	var logs syncbuf.Buffer
	m, err := httplimit.New(httplimit.Config{Checker: limitertest.New(t, "", nil), OnError: httplimit.Reject, Now: clock.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	up := &upstream{}
	serve := func(n int) {
		for range n {
			w := httptest.NewRecorder()
			m.Wrap(up).ServeHTTP(w, httptest.NewRequest("GET", "/api/a", nil))
			if w.Code != 503 {
				t.Fatalf("got %d %q, want 503", w.Code, w.Body.String())
			}
		}
	}
	serve(30)
	if got := strings.Count(logs.String(), "rate limit check failed"); got != 1 {
		t.Fatalf("%d log lines for 30 failed checks, want 1:\n%s", got, logs.String())
	}
	clock.Advance(10 * time.Second)
	serve(1)
	if got := strings.Count(logs.String(), "rate limit check failed"); got != 2 || !strings.Contains(logs.String(), "unlogged_since_last_line=29") {
		t.Fatalf("after the period: %d lines, want 2, the second counting 29 unlogged:\n%s", got, logs.String())
	}
}
