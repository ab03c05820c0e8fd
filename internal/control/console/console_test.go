package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/control/console"
	"github.com/weirhq/weir/internal/platform/auth"
	"github.com/weirhq/weir/pkg/adminapi"
)

const (
	rwToken = "0123456789abcdef-rw"
	roToken = "0123456789abcdef-ro"
)

// api is a small admin API for one global rule "r" of domain "d" over DCs
// a and b, behind the real bearer-token middleware; it counts the share
// policy writes it accepts.
type api struct {
	mu     sync.Mutex
	writes []string

	// Optional behaviours, set before the first request.
	//
	// overview, if set, answers GET /overview instead of the standby's
	// 503 naming the leader.
	overview http.HandlerFunc
	// globals more global rules g0, g1, ... in domain d, each with c
	// drained; their shares take sharesDelay to answer. sharesDelay
	// also slows the shares of r.
	globals     int
	sharesDelay time.Duration
	// sharesFail, if set, answers the shares of every rule.
	sharesFail http.HandlerFunc
	// failList answers GET /rate-limits of these domains 503.
	failList map[string]bool
	// invalid are more invalid rules without a valid version, in d.
	invalid []adminapi.InvalidRule
	// shareWarnings are sent, as Weir-Warning fields, with the answer
	// to a share policy write.
	shareWarnings []string

	inFlight, maxInFlight int // shares requests being answered
}

// sharesCall counts a shares request in flight while it is answered.
func (a *api) sharesCall() func() {
	a.mu.Lock()
	a.inFlight++
	a.maxInFlight = max(a.maxInFlight, a.inFlight)
	a.mu.Unlock()
	time.Sleep(a.sharesDelay)
	return func() {
		a.mu.Lock()
		a.inFlight--
		a.mu.Unlock()
	}
}

func (a *api) handler(tokens auth.Store) http.Handler {
	mux := http.NewServeMux()
	js := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /rate-limits", func(w http.ResponseWriter, r *http.Request) {
		if a.failList[r.URL.Query().Get("domain")] {
			w.WriteHeader(http.StatusServiceUnavailable)
			js(w, adminapi.ErrorBody{Error: "etcd unavailable"})
			return
		}
		rules := []map[string]any{
			{"rule_id": "r", "domain": "d", "limit": 10, "window_seconds": 1, "scope": "global", "enabled": true},
			{"rule_id": "held", "domain": "d", "limit": 5, "window_seconds": 1, "scope": "local", "enabled": true},
			{"rule_id": "remembered", "domain": "d", "limit": 7, "window_seconds": 1, "scope": "local", "enabled": true},
		}
		for i := range a.globals {
			rules = append(rules, map[string]any{"rule_id": fmt.Sprintf("g%d", i), "domain": "d", "limit": 10, "window_seconds": 1, "scope": "global", "enabled": true})
		}
		js(w, map[string]any{
			"rules": rules,
			"invalid": append([]adminapi.InvalidRule{
				{Domain: "d", RuleID: "held", Error: "limit: want an integer", InForce: true, Kept: adminapi.KeptShadow},
				{Domain: "d", RuleID: "remembered", Error: "truncated", InForce: true, Kept: adminapi.KeptMemory},
				{Domain: "d", RuleID: "lost", Error: "malformed JSON"},
			}, a.invalid...),
		})
	})
	mux.HandleFunc("GET /rate-limits/held", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(adminapi.HeaderInvalidDocument, longReason)
		js(w, map[string]any{"rule_id": "held", "domain": "d", "limit": 5, "window_seconds": 1, "scope": "local", "enabled": true})
	})
	mux.HandleFunc("GET /rate-limits/{id}/shares", func(w http.ResponseWriter, r *http.Request) {
		defer a.sharesCall()()
		if a.sharesFail != nil {
			a.sharesFail(w, r)
			return
		}
		js(w, adminapi.Shares{Domain: "d", RuleID: r.PathValue("id"), DCs: []adminapi.DCShare{{DC: "a", Share: 1}, {DC: "c", Drained: true}}})
	})
	mux.HandleFunc("GET /rate-limits/r/shares", func(w http.ResponseWriter, r *http.Request) {
		defer a.sharesCall()()
		if a.sharesFail != nil {
			a.sharesFail(w, r)
			return
		}
		w.Header().Set("ETag", `"3"`)
		js(w, adminapi.Shares{Domain: "d", RuleID: "r", ETag: `"3"`, DCs: []adminapi.DCShare{{DC: "a", Demand: 0.8, Share: 0.5, Target: 0.5}, {DC: "b", Demand: 0.2, Share: 0.5, Target: 0.5}}})
	})
	mux.HandleFunc("PUT /rate-limits/r/shares", func(w http.ResponseWriter, r *http.Request) {
		var body json.RawMessage
		json.NewDecoder(r.Body).Decode(&body)
		a.mu.Lock()
		a.writes = append(a.writes, string(body))
		for _, msg := range a.shareWarnings {
			w.Header().Add(adminapi.HeaderWarning, msg)
		}
		a.mu.Unlock()
		w.Write(body)
	})
	mux.HandleFunc("GET /overview", func(w http.ResponseWriter, r *http.Request) {
		if a.overview != nil {
			a.overview(w, r)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		js(w, adminapi.ErrorBody{Error: "not the leader", Leader: "https://leader:8070"})
	})
	return auth.Middleware(tokens, mux)
}

func newConsole(t *testing.T, secure bool) (*console.Console, *api) {
	t.Helper()
	return newConsoleWith(t, &api{}, console.Config{Secure: secure})
}

// newConsoleWith serves a's API through a console configured by cfg (its
// API, Tokens and DefaultDomain set here).
func newConsoleWith(t *testing.T, a *api, cfg console.Config) (*console.Console, *api) {
	t.Helper()
	tokens, err := auth.Parse([]byte(rwToken + " rw alice\n" + roToken + " ro bob\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.API, cfg.Tokens, cfg.DefaultDomain = a.handler(tokens), tokens, "d"
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, a
}

// do sends a request to h with session as the cookie's value, if not "".
func do(h http.Handler, method, target, session string, form url.Values, hdr ...string) *httptest.ResponseRecorder {
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req := httptest.NewRequest(method, target, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if session != "" {
		req.AddCookie(&http.Cookie{Name: console.CookieName, Value: session})
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// signIn signs in to h with token and returns the session cookie's value.
func signIn(t *testing.T, h http.Handler, token string) string {
	t.Helper()
	rec := do(h, "POST", "/ui/signin", "", url.Values{"token": {token}})
	for _, ck := range rec.Result().Cookies() {
		if ck.Name == console.CookieName && ck.Value != "" {
			return ck.Value
		}
	}
	t.Fatalf("sign-in: got %d without a session cookie", rec.Code)
	return ""
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("got a page without a CSRF token:\n%s", body)
	}
	return m[1]
}

func TestSignIn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		secure bool
		token  string
		code   int
		cname  string // the cookie's name
		cookie string // want in Set-Cookie; "" for none
	}{
		{"read-write token", false, rwToken, http.StatusSeeOther, console.CookieName, "Path=/ui/; HttpOnly; SameSite=Strict"},
		{"over TLS", true, rwToken, http.StatusSeeOther, console.SecureCookieName, "Path=/; HttpOnly; Secure; SameSite=Strict"},
		{"read-only token", false, roToken, http.StatusSeeOther, console.CookieName, "Path=/ui/; HttpOnly; SameSite=Strict"},
		{"unknown token", false, "not-a-token-of-ours", http.StatusUnauthorized, "", ""},
		{"empty", false, "", http.StatusUnauthorized, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newConsole(t, tc.secure)
			rec := do(c, "POST", "/ui/signin", "", url.Values{"token": {tc.token}, "next": {"/ui/cluster"}})
			if rec.Code != tc.code {
				t.Fatalf("got status %d, want %d", rec.Code, tc.code)
			}
			got := rec.Header().Get("Set-Cookie")
			if tc.cookie == "" {
				if got != "" {
					t.Errorf("got Set-Cookie %q, want none", got)
				}
				return
			}
			if !strings.HasPrefix(got, tc.cname+"=") || !strings.Contains(got, tc.cookie) {
				t.Errorf("got Set-Cookie %q, want %s with %s", got, tc.cname, tc.cookie)
			}
			if strings.Contains(got, tc.token) {
				t.Errorf("got Set-Cookie %q holding the token, want a session id", got)
			}
			if loc := rec.Header().Get("Location"); loc != "/ui/cluster" {
				t.Errorf("got Location %q, want /ui/cluster", loc)
			}
		})
	}
}

func TestRedirects(t *testing.T) {
	c, _ := newConsole(t, false)
	for _, tc := range []struct{ name, method, path, token, next string }{
		{"page without a session", "GET", "/ui/cluster", "", "/ui/signin?next=%2Fui%2Fcluster"},
		{"page with a stale token", "GET", "/ui/", "gone-token-0123456789", "/ui/signin?next=%2Fui%2F"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(c, tc.method, tc.path, tc.token, nil)
			if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != tc.next {
				t.Errorf("got %d to %q, want 303 to %q", rec.Code, rec.Header().Get("Location"), tc.next)
			}
		})
	}
	// A sign-in never sends one off the console.
	for _, next := range []string{"https://evil.example/", "//evil.example/ui/", "/ui/\\evil", "/rate-limits"} {
		rec := do(c, "POST", "/ui/signin", "", url.Values{"token": {rwToken}, "next": {next}})
		if loc := rec.Header().Get("Location"); loc != "/ui/" {
			t.Errorf("next=%q: got Location %q, want /ui/", next, loc)
		}
	}
}

func TestSharesChanges(t *testing.T) {
	c, a := newConsole(t, false)
	rw, ro := signIn(t, c, rwToken), signIn(t, c, roToken)
	page := do(c, "GET", "/ui/rules/d/r/shares", rw, nil)
	if page.Code != 200 {
		t.Fatalf("shares page: got %d, want 200:\n%s", page.Code, page.Body)
	}
	csrf := csrfOf(t, page.Body.String())
	roPage := do(c, "GET", "/ui/rules/d/r/shares", ro, nil)
	if strings.Contains(roPage.Body.String(), `id="apply"`) || !strings.Contains(roPage.Body.String(), `id="readonly"`) {
		t.Errorf("read-only shares page: got an apply button or no read-only notice")
	}
	roCSRF := csrfOf(t, roPage.Body.String())

	pin := url.Values{"action": {"apply"}, "etag": {`"3"`}, "pin-a": {"70"}}
	with := func(v url.Values, k, val string) url.Values {
		out := url.Values{}
		for kk, vv := range v {
			out[kk] = vv
		}
		out.Set(k, val)
		return out
	}
	for _, tc := range []struct {
		name    string
		session string
		form    url.Values
		hdr     []string
		code    int
		writes  int
	}{
		{"no CSRF token", rw, pin, nil, http.StatusForbidden, 0},
		{"a forged CSRF token", rw, with(pin, "csrf", strings.Repeat("0", 64)), nil, http.StatusForbidden, 0},
		{"another session's CSRF token", rw, with(pin, "csrf", roCSRF), nil, http.StatusForbidden, 0},
		{"from another site", rw, with(pin, "csrf", csrf), []string{"Origin", "https://evil.example"}, http.StatusForbidden, 0},
		{"read-only token", ro, with(pin, "csrf", roCSRF), nil, http.StatusForbidden, 0},
		{"without a session", "", with(pin, "csrf", csrf), nil, http.StatusUnauthorized, 0},
		{"a bad percentage", rw, with(with(pin, "csrf", csrf), "pin-a", "170"), nil, http.StatusUnprocessableEntity, 0},
		{"preview", rw, with(with(pin, "csrf", csrf), "action", "preview"), nil, http.StatusOK, 0},
		{"apply", rw, with(pin, "csrf", csrf), nil, http.StatusSeeOther, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a.mu.Lock()
			before := len(a.writes)
			a.mu.Unlock()
			rec := do(c, "POST", "/ui/rules/d/r/shares", tc.session, tc.form, tc.hdr...)
			if rec.Code != tc.code {
				t.Errorf("got status %d, want %d:\n%s", rec.Code, tc.code, rec.Body)
			}
			a.mu.Lock()
			got := len(a.writes) - before
			a.mu.Unlock()
			if got != tc.writes {
				t.Errorf("got %d policy writes, want %d", got, tc.writes)
			}
		})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.writes) != 1 || a.writes[0] != `{"dcs":{"a":{"pin":0.7}}}` {
		t.Errorf("got writes %q, want one pin of a at 0.7", a.writes)
	}
}

// TestWriteWarnings: the warnings of an accepted write are kept in the
// session that made it, not in the redirect's URL, and shown once,
// escaped, on its next page, the last 8 when there are more; another
// session does not see them.
func TestWriteWarnings(t *testing.T) {
	const evil = `<script>alert("x")</script> & more`
	var many []string
	for i := range 10 {
		many = append(many, fmt.Sprintf("warning %d of 10", i))
	}
	for _, tc := range []struct {
		name  string
		warns []string
		shown []string // in order
	}{
		{"one, with markup", []string{evil}, []string{`&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; more`}},
		{"more than the bound", many, many[2:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newConsoleWith(t, &api{shareWarnings: tc.warns}, console.Config{})
			rw, other := signIn(t, c, rwToken), signIn(t, c, rwToken)
			csrf := csrfOf(t, do(c, "GET", "/ui/rules/d/r/shares", rw, nil).Body.String())
			rec := do(c, "POST", "/ui/rules/d/r/shares", rw, url.Values{"csrf": {csrf}, "action": {"apply"}, "etag": {`"3"`}, "pin-a": {"70"}})
			loc := rec.Header().Get("Location")
			if rec.Code != http.StatusSeeOther || loc != "/ui/rules/d/r/shares?applied=1" {
				t.Fatalf("apply: got %d to %q, want 303 to /ui/rules/d/r/shares?applied=1", rec.Code, loc)
			}
			if body := do(c, "GET", loc, other, nil).Body.String(); strings.Contains(body, `id="warnings"`) {
				t.Errorf("another session: got the warnings, want none")
			}
			body := do(c, "GET", loc, rw, nil).Body.String()
			if strings.Contains(body, "<script>") {
				t.Errorf("got the warning unescaped:\n%s", body)
			}
			at := -1
			for _, w := range tc.shown {
				if n := strings.Count(body, w); n != 1 {
					t.Errorf("warning %q: got it %d times, want once", w, n)
				}
				i := strings.Index(body, w)
				if i < at {
					t.Errorf("warning %q: got it out of order", w)
				}
				at = i
			}
			if n := strings.Count(body, `class="banner warning"`); n != len(tc.shown) {
				t.Errorf("got %d warnings, want %d", n, len(tc.shown))
			}
			if body := do(c, "GET", loc, rw, nil).Body.String(); strings.Contains(body, `id="warnings"`) {
				t.Errorf("reload: got the warnings again, want none")
			}
		})
	}
}

func TestPreview(t *testing.T) {
	c, _ := newConsole(t, false)
	rw := signIn(t, c, rwToken)
	csrf := csrfOf(t, do(c, "GET", "/ui/rules/d/r/shares", rw, nil).Body.String())
	rec := do(c, "POST", "/ui/rules/d/r/shares", rw, url.Values{"csrf": {csrf}, "action": {"preview"}, "pin-b": {"30"}})
	// b pinned at 30%: a, the only other DC, gets the remaining 70%.
	for _, want := range []string{`<td class="num preview changed">70.0%</td>`, `<td class="num preview changed">30.0%</td>`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("preview: got a page without %s:\n%s", want, rec.Body)
		}
	}
}

func TestStandbyNamesTheLeader(t *testing.T) {
	c, _ := newConsole(t, false)
	rec := do(c, "GET", "/ui/", signIn(t, c, roToken), nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `id="standby"`) || !strings.Contains(rec.Body.String(), `href="https://leader:8070/ui/"`) {
		t.Errorf("overview on a standby: got %d without the leader's console:\n%s", rec.Code, rec.Body)
	}
	// The rules, read from etcd, are there all the same.
	if !strings.Contains(rec.Body.String(), `data-rule="d/r"`) {
		t.Errorf("overview on a standby: got no row of rule r")
	}
}

func TestAssetsAndHeaders(t *testing.T) {
	c, _ := newConsole(t, false)
	for _, path := range []string{"/ui/static/style.css", "/ui/static/console.js"} {
		rec := do(c, "GET", path, "", nil)
		if rec.Code != 200 || rec.Body.Len() == 0 {
			t.Errorf("%s: got %d with %d bytes, want 200 with the file", path, rec.Code, rec.Body.Len())
		}
	}
	rec := do(c, "GET", "/ui/signin", "", nil)
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("got CSP %q, want scripts from the console only", csp)
	}
}

// TestOverviewMarksCorruptRules: a rule whose stored document is invalid is
// shown at the version in force with a marker saying where that version
// is kept, and one with no valid version kept gets a row saying it is not
// enforced.
func TestOverviewMarksCorruptRules(t *testing.T) {
	c, _ := newConsole(t, false)
	rec := do(c, "GET", "/ui/", signIn(t, c, roToken), nil)
	if rec.Code != 200 {
		t.Fatalf("GET /ui/: got %d, want 200:\n%s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	for _, want := range []string{
		"stored document invalid, last valid version in force: limit: want an integer",
		"stored document and its last valid copy invalid, last valid version held in memory only (in force where already loaded; the leader restores the copy): truncated",
		"stored document invalid and no valid version kept: not enforced by processes started since: malformed JSON",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("overview: no %q in\n%s", want, body)
		}
	}
}
