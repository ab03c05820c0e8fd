package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/testkit/adminclienttest"
	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/sharepolicy"
)

// result is what one run of weirctl did.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs weirctl against a server.
type cli struct {
	t     *testing.T
	srv   *adminclienttest.Server
	env   map[string]string
	stdin string
	// transport, when set, carries the requests instead of the server's.
	transport http.RoundTripper
	// ctx, when set, is the context of the runs.
	ctx context.Context
}

func newCLI(t *testing.T, srv *adminclienttest.Server) *cli {
	return &cli{t: t, srv: srv, env: map[string]string{"WEIR_TOKEN": adminclienttest.AdminToken, "WEIR_SERVER": srv.URL}}
}

func (c *cli) run(args ...string) result {
	c.t.Helper()
	var out, errOut bytes.Buffer
	tr := c.transport
	if tr == nil {
		tr = c.srv.HTTPClient().Transport
	}
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	code := run(ctx, env{
		args:      args,
		stdin:     strings.NewReader(c.stdin),
		stdout:    &out,
		stderr:    &errOut,
		lookupEnv: func(k string) (string, bool) { v, ok := c.env[k]; return v, ok },
		transport: tr,
	})
	r := result{code, out.String(), errOut.String()}
	for _, tok := range []string{adminclienttest.AdminToken, adminclienttest.ReadOnlyToken} {
		if strings.Contains(r.stdout+r.stderr, tok) {
			c.t.Errorf("weirctl %q printed the token:\n%s%s", args, r.stdout, r.stderr)
		}
	}
	return r
}

// ok runs weirctl and fails the test unless it exits 0.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("weirctl %q: got exit %d, want 0; stderr:\n%s", args, r.code, r.stderr)
	}
	return r.stdout
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

const (
	loginRule = `{"rule_id": "login", "path_pattern": "/auth/login", "methods": ["POST"], "key_type": "username",
		"limit": 5, "window_seconds": 300, "algorithm": "SlidingWindowLog", "failure_mode": "closed"}`
	apiRule = `{"rule_id": "api", "path_pattern": "/api/**", "key_type": "ip", "limit": 1000, "window_seconds": 60,
		"description": "per-IP API limit", "shadow": true}`
	searchRule = `{"rule_id": "search", "key_type": ["tenant"], "limit": 50000, "window_seconds": 60, "scope": "global"}`
)

func shopServer(t *testing.T) *adminclienttest.Server {
	srv := adminclienttest.New(t, nil, "ap-south", "eu-west", "us-east")
	for _, doc := range []string{loginRule, apiRule, searchRule} {
		srv.AddRule(t, "shop", doc)
	}
	return srv
}

func TestExitStatus(t *testing.T) {
	srv := shopServer(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(adminclienttest.AdminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		env    map[string]string // replaces the environment's entries
		args   []string
		code   int
		stderr string // a part of stderr
	}{
		{"help", nil, []string{"--help"}, 0, ""},
		{"get", nil, []string{"--domain", "shop", "get"}, 0, ""},
		{"token file", map[string]string{"WEIR_TOKEN": ""}, []string{"--token-file", tokenFile, "--domain", "shop", "get", "login"}, 0, ""},
		{"token flag", map[string]string{"WEIR_TOKEN": ""}, []string{"--token", adminclienttest.ReadOnlyToken, "--domain", "shop", "get"}, 0, ""},

		{"unknown command", nil, []string{"frob"}, 2, `unknown command "frob"`},
		{"unknown subcommand", nil, []string{"shares", "pinn", "x"}, 2, `unknown command "pinn"`},
		{"unknown flag", nil, []string{"get", "--frob"}, 2, "unknown flag: --frob"},
		{"missing argument", nil, []string{"status", "login"}, 2, "missing KEY"},
		{"extra argument", nil, []string{"delete", "a", "b"}, 2, `unexpected argument "b"`},
		{"bad output", nil, []string{"-o", "yaml", "get"}, 2, `--output "yaml"`},
		{"bad timeout", nil, []string{"--timeout", "0s", "get"}, 2, "--timeout"},
		{"bad share", nil, []string{"shares", "pin", "search", "us-east", "120%"}, 2, `share "120%"`},
		{"bad DC name", nil, []string{"shares", "pin", "search", "US_EAST", "0.5"}, 2, `DC "US_EAST"`},
		{"token and token file", nil, []string{"--token", "x", "--token-file", tokenFile, "get"}, 2, "not both"},
		{"no token", map[string]string{"WEIR_TOKEN": ""}, []string{"get"}, 2, "no API token"},
		{"apply without a file", nil, []string{"apply"}, 2, "missing -f FILE"},
		{"bad server URL", nil, []string{"--server", "127.0.0.1:8070", "get"}, 2, "want http:// or https://"},

		{"unknown rule", nil, []string{"--domain", "shop", "get", "nope"}, 1, `get rule "nope": rule "nope" not found in domain "shop" (HTTP 404)`},
		{"wrong token", map[string]string{"WEIR_TOKEN": "wrong"}, []string{"get"}, 1, "(HTTP 401)"},
		{"read-only token writes", map[string]string{"WEIR_TOKEN": adminclienttest.ReadOnlyToken}, []string{"--domain", "shop", "delete", "login"}, 1, "(HTTP 403)"},
		{"missing token file", map[string]string{"WEIR_TOKEN": ""}, []string{"--token-file", tokenFile + ".nope", "get"}, 1, "read token"},
		{"rule file errors", nil, []string{"apply", "-f", "testdata/bad.yaml"}, 1,
			"testdata/bad.yaml: rules[0].limit: want an integer, got \"5\"\n  rules[1].limit: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCLI(t, srv)
			for k, v := range tt.env {
				c.env[k] = v
			}
			r := c.run(tt.args...)
			if r.code != tt.code {
				t.Errorf("got exit %d, want %d; stderr:\n%s", r.code, tt.code, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("got stderr\n%s\nwant it to contain %q", r.stderr, tt.stderr)
			}
			if tt.code == 2 && !strings.Contains(r.stderr, "--help' for usage") {
				t.Errorf("got stderr\n%s\nwant a pointer to --help", r.stderr)
			}
		})
	}
}

func TestFieldErrors(t *testing.T) {
	srv := adminclienttest.New(t, nil, "eu")
	c := newCLI(t, srv)
	// A server whose validation is stricter than this weirctl's.
	c.transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		body := `{"error": "invalid rule", "fields": [{"field": "limit", "reason": "at most 100 for this domain"},
			{"field": "", "reason": "quota exhausted"}]}`
		return &http.Response{StatusCode: http.StatusUnprocessableEntity, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	})
	c.stdin = `{"domain": "shop", "rules": [{"rule_id": "a", "limit": 1000, "window_seconds": 1}]}`
	// The list fails first; that is the error reported.
	r := c.run("apply", "-f", "-")
	want := "weirctl: list rules: invalid rule (HTTP 422)\n  limit: at most 100 for this domain\n  quota exhausted\n"
	if r.code != 1 || r.stderr != want {
		t.Errorf("got exit %d, stderr\n%s\nwant 1 and\n%s", r.code, r.stderr, want)
	}
}

func TestFollower(t *testing.T) {
	srv := shopServer(t)
	srv.SetLeader(false, "http://coord-b:8070")
	r := newCLI(t, srv).run("--domain", "shop", "shares", "get", "search")
	if r.code != 1 || !strings.Contains(r.stderr, "not the leader") || !strings.Contains(r.stderr, "(HTTP 503); the leader is http://coord-b:8070") {
		t.Errorf("got exit %d, stderr %q; want 1 and the server's reason", r.code, r.stderr)
	}
}

func TestGet(t *testing.T) {
	srv := shopServer(t)
	c := newCLI(t, srv)

	got := c.ok("get", "--domain", "shop")
	want := `RULE_ID  PATH         METHODS  KEY       LIMIT   WINDOW  ALGORITHM             SCOPE   STATE
api      /api/**      -        ip        1,000   1m      SlidingWindowCounter  global  shadow
login    /auth/login  POST     username  5       5m      SlidingWindowLog      global  enabled
search   -            -        tenant    50,000  1m      SlidingWindowCounter  global  enabled
`
	if got != want {
		t.Errorf("get: got\n%s\nwant\n%s", got, want)
	}

	srv.AddRule(t, "blog", `{"rule_id": "comments", "limit": 10, "window_seconds": 60, "enabled": false}`)
	srv.AddRule(t, "blog", `{"rule_id": "plan", "limit": 100, "calendar": "month", "algorithm": "FixedWindow"}`)
	got = c.ok("get")
	want = `DOMAIN  RULE_ID   PATH         METHODS  KEY       LIMIT   WINDOW  ALGORITHM             SCOPE   STATE
blog    comments  -            -        -         10      1m      SlidingWindowCounter  global  disabled
blog    plan      -            -        -         100     month   FixedWindow           global  enabled
shop    api       /api/**      -        ip        1,000   1m      SlidingWindowCounter  global  shadow
shop    login     /auth/login  POST     username  5       5m      SlidingWindowLog      global  enabled
shop    search    -            -        tenant    50,000  1m      SlidingWindowCounter  global  enabled
`
	if got != want {
		t.Errorf("get of every domain: got\n%s\nwant\n%s", got, want)
	}

	var list struct {
		Rules []map[string]any `json:"rules"`
	}
	if err := json.Unmarshal([]byte(c.ok("get", "--domain", "shop", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Rules) != 3 || list.Rules[1]["rule_id"] != "login" || list.Rules[1]["limit"] != 5.0 {
		t.Errorf("get -o json: got %v, want the three rules", list.Rules)
	}

	got = c.ok("get", "login", "--domain", "shop")
	fields := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		f := strings.Fields(line)
		fields[f[0]] = strings.Join(f[1:], " ")
	}
	for k, v := range map[string]string{"FIELD": "VALUE", "rule_id": "login", "methods": `["POST"]`, "failure_mode": "closed",
		"created_at": "2026-01-02T03:04:05Z", "etag": `"1"`} {
		if fields[k] != v {
			t.Errorf("get login: got %s %q, want %q in\n%s", k, fields[k], v, got)
		}
	}

	var one map[string]any
	if err := json.Unmarshal([]byte(c.ok("get", "login", "--domain", "shop", "-o", "json")), &one); err != nil {
		t.Fatal(err)
	}
	stored, _ := srv.Rule("shop", "login")
	var want1 map[string]any
	json.Unmarshal([]byte(stored), &want1)
	if !jsonEqual(one, want1) {
		t.Errorf("get login -o json: got %v, want %v", one, want1)
	}

	if got := c.ok("get", "--domain", "empty"); got != "no rules\n" {
		t.Errorf("get of an empty domain: got %q, want %q", got, "no rules\n")
	}
	if got := c.ok("get", "--domain", "empty", "-o", "json"); got != "{\n  \"rules\": []\n}\n" {
		t.Errorf("get -o json of an empty domain: got %q", got)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestDelete(t *testing.T) {
	srv := shopServer(t)
	c := newCLI(t, srv)
	if got, want := c.ok("delete", "login", "--domain", "shop"), "Rate limit rule 'login' deleted successfully.\n"; got != want {
		t.Errorf("delete: got %q, want %q", got, want)
	}
	if _, ok := srv.Rule("shop", "login"); ok {
		t.Errorf("the rule is still there after delete")
	}
	got := c.ok("delete", "api", "--domain", "shop", "-o", "json")
	if want := "{\n  \"message\": \"Rate limit rule 'api' deleted successfully.\"\n}\n"; got != want {
		t.Errorf("delete -o json: got %q, want %q", got, want)
	}
}

// rulesFile is shop's rules as an operator changes them: login's limit
// and window change, api loses its description and shadow mode, search is
// unchanged, and checkout is new.
const rulesFile = `domain: shop
rules:
  - rule_id: login
    path_pattern: /auth/login
    methods: [POST]
    key_type: username
    limit: 10
    window_seconds: 600
    algorithm: SlidingWindowLog
    failure_mode: closed
  - rule_id: api
    path_pattern: /api/**
    key_type: ip
    limit: 1000
    window_seconds: 60
  - rule_id: search
    key_type: tenant
    limit: 50000
    window_seconds: 60
  - rule_id: checkout
    path_pattern: /checkout
    limit: 100
    window_seconds: 1
    scope: local
`

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestApplyDryRun(t *testing.T) {
	srv := shopServer(t)
	srv.AddRule(t, "shop", `{"rule_id": "old", "limit": 1, "window_seconds": 1}`)
	c := newCLI(t, srv)
	file := writeFile(t, rulesFile)
	before := map[string]string{}
	for _, id := range []string{"login", "api", "search", "old"} {
		before[id], _ = srv.Rule("shop", id)
	}

	got := c.ok("apply", "-f", file, "--dry-run", "--prune")
	want := `~ login: would update
    limit: 5 → 10
    window_seconds: 300 → 600
~ api: would update
    description: "per-IP API limit" → (unset)
    shadow: true → (unset)
= search: unchanged
+ checkout: would create
    path_pattern: "/checkout"
    limit: 100
    window_seconds: 1
    algorithm: "SlidingWindowCounter"
    scope: "local"
    failure_mode: "local"
    enabled: true
    retry_advice: "retry_after"
- old: would delete
domain shop: 1 to create, 2 to update, 1 unchanged, 1 to delete
dry run: nothing was changed
`
	if got != want {
		t.Errorf("apply --dry-run: got\n%s\nwant\n%s", got, want)
	}
	if w := srv.Writes(); len(w) != 0 {
		t.Errorf("apply --dry-run wrote %v, want nothing", w)
	}
	for id, doc := range before {
		if now, _ := srv.Rule("shop", id); now != doc {
			t.Errorf("rule %s changed in a dry run: got %s, want %s", id, now, doc)
		}
	}

	var rep applyReport
	if err := json.Unmarshal([]byte(c.ok("apply", "-f", file, "--dry-run", "-o", "json")), &rep); err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range rep.Rules {
		actions = append(actions, r.RuleID+":"+r.Action)
	}
	if want := []string{"login:update", "api:update", "search:unchanged", "checkout:create"}; !rep.DryRun || !slices.Equal(actions, want) ||
		!slices.Equal(rep.NotInFile, []string{"old"}) {
		t.Errorf("apply --dry-run -o json: got %+v, want dry_run, %v and not_in_file [old]", rep, want)
	}
	if w := srv.Writes(); len(w) != 0 {
		t.Errorf("apply --dry-run -o json wrote %v, want nothing", w)
	}
}

func TestApply(t *testing.T) {
	srv := shopServer(t)
	srv.AddRule(t, "shop", `{"rule_id": "old", "limit": 1, "window_seconds": 1}`)
	c := newCLI(t, srv)
	file := writeFile(t, rulesFile)
	loginETag := getETag(t, c, "login")

	got := c.ok("apply", "-f", file)
	for _, line := range []string{"~ login: updated\n    limit: 5 → 10\n", "+ checkout: created\n", "= search: unchanged\n",
		"domain shop: 1 created, 2 updated, 1 unchanged\n", "not in the file, kept (--prune deletes them): old\n"} {
		if !strings.Contains(got, line) {
			t.Errorf("apply: got\n%s\nwant it to contain %q", got, line)
		}
	}

	var writes []string
	for _, w := range srv.Writes() {
		writes = append(writes, w.Method+" "+w.Path)
	}
	if want := []string{"PUT /rate-limits/login", "PUT /rate-limits/api", "POST /rate-limits"}; !slices.Equal(writes, want) {
		t.Fatalf("apply: got writes %v, want %v", writes, want)
	}
	put := srv.Writes()[0]
	if put.IfMatch != loginETag || put.Query.Get("domain") != "shop" {
		t.Errorf("PUT login: got If-Match %q, domain %q; want %q, shop", put.IfMatch, put.Query.Get("domain"), loginETag)
	}
	if want := `{"limit":10,"window_seconds":600}`; !sameDoc(put.Body, want) {
		t.Errorf("PUT login: got body %s, want %s", put.Body, want)
	}
	if want := `{"description":null,"shadow":null}`; !sameDoc(srv.Writes()[1].Body, want) {
		t.Errorf("PUT api: got body %s, want %s", srv.Writes()[1].Body, want)
	}
	api, _ := srv.Rule("shop", "api")
	if strings.Contains(api, "description") || strings.Contains(api, "shadow") {
		t.Errorf("api after apply: got %s, want no description nor shadow", api)
	}
	if _, ok := srv.Rule("shop", "checkout"); !ok {
		t.Errorf("checkout was not created")
	}

	// Applying again changes nothing.
	n := len(srv.Writes())
	got = c.ok("apply", "-f", file)
	if want := "domain shop: 4 unchanged\n"; !strings.Contains(got, want) || len(srv.Writes()) != n {
		t.Errorf("second apply: got\n%s\nand %d writes; want %q and none", got, len(srv.Writes())-n, want)
	}

	// --prune deletes what the file lacks.
	got = c.ok("apply", "-f", file, "--prune")
	if !strings.Contains(got, "- old: deleted\n") || !strings.Contains(got, "4 unchanged, 1 deleted") {
		t.Errorf("apply --prune: got\n%s\nwant old deleted", got)
	}
	if _, ok := srv.Rule("shop", "old"); ok {
		t.Errorf("old is still there after apply --prune")
	}
}

func getETag(t *testing.T, c *cli, id string) string {
	t.Helper()
	out := c.ok("get", id, "--domain", "shop")
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "etag"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("get %s: no etag in\n%s", id, out)
	return ""
}

func sameDoc(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && jsonEqual(x, y)
}

func TestApplyConflict(t *testing.T) {
	srv := shopServer(t)
	c := newCLI(t, srv)
	base := srv.HTTPClient().Transport
	// Another operator changes login between apply's GET and its PUT.
	c.transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(r)
		if r.Method == http.MethodGet && r.URL.Path == "/rate-limits/login" {
			srv.AddRule(t, "shop", strings.Replace(loginRule, `"limit": 5`, `"limit": 7`, 1))
		}
		return resp, err
	})
	r := c.run("apply", "-f", writeFile(t, rulesFile))
	if r.code != 1 || !strings.Contains(r.stderr, "(HTTP 412)") || !strings.Contains(r.stderr, "run apply again") ||
		!strings.Contains(r.stderr, "1 of 4 changes failed") {
		t.Errorf("got exit %d, stderr\n%s\nwant 1, the 412 and a hint", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "~ login: failed to update") || !strings.Contains(r.stdout, "+ checkout: created") {
		t.Errorf("got stdout\n%s\nwant login failed and checkout created", r.stdout)
	}
	if login, _ := srv.Rule("shop", "login"); !strings.Contains(login, `"limit":7`) {
		t.Errorf("login after a refused update: got %s, want the other operator's limit 7", login)
	}
}

func TestApplyInterrupted(t *testing.T) {
	srv := shopServer(t)
	c := newCLI(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.ctx = ctx
	base := srv.HTTPClient().Transport
	// The operator presses ^C while the first write is under way.
	c.transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(r)
		if r.Method != http.MethodGet {
			cancel()
		}
		return resp, err
	})
	r := c.run("apply", "-f", writeFile(t, rulesFile))
	if r.code != 1 || !strings.Contains(r.stderr, "interrupted (context canceled); run it again to finish") {
		t.Errorf("got exit %d, stderr\n%s\nwant 1 and interrupted", r.code, r.stderr)
	}
	if w := srv.Writes(); len(w) != 1 {
		t.Errorf("got %d writes, want 1: none after the interruption", len(w))
	}
}

func TestApplyPruneKeepsOtherDomains(t *testing.T) {
	srv := shopServer(t)
	srv.AddRule(t, "blog", `{"rule_id": "comments", "limit": 10, "window_seconds": 60}`)
	c := newCLI(t, srv)
	base := srv.HTTPClient().Transport
	// A server that ignores ?domain= when listing.
	c.transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodGet && r.URL.Path == "/rate-limits" {
			r.URL.RawQuery = ""
		}
		return base.RoundTrip(r)
	})
	got := c.ok("apply", "-f", writeFile(t, rulesFile), "--prune")
	if strings.Contains(got, "comments") {
		t.Errorf("apply --prune of shop: got\n%s\nwant nothing about blog's rule", got)
	}
	if _, ok := srv.Rule("blog", "comments"); !ok {
		t.Errorf("apply --prune of shop deleted blog's rule")
	}
}

func TestApplyDomain(t *testing.T) {
	srv := shopServer(t)
	r := newCLI(t, srv).run("--domain", "other", "apply", "-f", writeFile(t, rulesFile))
	if r.code != 2 || !strings.Contains(r.stderr, `the file's domain is "shop"`) {
		t.Errorf("got exit %d, stderr %q; want 2 and the domains", r.code, r.stderr)
	}
}

func TestApplyStdin(t *testing.T) {
	srv := adminclienttest.New(t, nil, "eu")
	c := newCLI(t, srv)
	c.stdin = `{"domain": "shop", "rules": [{"rule_id": "a", "limit": 1, "window_seconds": 1}]}`
	if got := c.ok("apply", "-f", "-"); !strings.Contains(got, "+ a: created") {
		t.Errorf("apply -f -: got\n%s\nwant a created", got)
	}
}

// sharesServer has the global rule search with live shares and a policy
// setting for eu-west.
func sharesServer(t *testing.T) *adminclienttest.Server {
	srv := shopServer(t)
	srv.SetLive("shop", "search", "ap-south", adminclienttest.Live{Demand: 0.05, Share: 0.1, Target: 0.1, Admitted: 0.05})
	srv.SetLive("shop", "search", "eu-west", adminclienttest.Live{Demand: 0.3, Share: 0.3, Target: 0.3, Admitted: 0.29})
	srv.SetLive("shop", "search", "us-east", adminclienttest.Live{Demand: 0.9, Share: 0.6, Target: 0.6, Admitted: 0.6})
	srv.SetPolicy("shop", "search", sharepolicy.Policy{DCs: map[string]sharepolicy.DCPolicy{"ap-south": {Floor: 0.1}}})
	return srv
}

func TestSharesGet(t *testing.T) {
	srv := sharesServer(t)
	c := newCLI(t, srv)
	c.env["WEIR_TOKEN"] = adminclienttest.ReadOnlyToken
	got := c.ok("shares", "get", "search", "--domain", "shop")
	want := `rule search, etag "4"
DC        DEMAND  TARGET  SHARE  ADMITTED  PIN  FLOOR  CEILING  DRAINED
ap-south  5.0%    10.0%   10.0%  5.0%      -    10.0%  -        no
eu-west   30.0%   30.0%   30.0%  29.0%     -    -      -        no
us-east   90.0%   60.0%   60.0%  60.0%     -    -      -        no
`
	if got != want {
		t.Errorf("shares get: got\n%s\nwant\n%s", got, want)
	}
	var doc struct {
		RuleID string           `json:"rule_id"`
		DCs    []map[string]any `json:"dcs"`
		ETag   string           `json:"etag"`
	}
	if err := json.Unmarshal([]byte(c.ok("shares", "get", "search", "--domain", "shop", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.RuleID != "search" || len(doc.DCs) != 3 || doc.DCs[0]["floor"] != 0.1 || doc.DCs[2]["demand"] != 0.9 || doc.ETag != `"4"` {
		t.Errorf("shares get -o json: got %+v", doc)
	}
}

func TestSharesPin(t *testing.T) {
	srv := sharesServer(t)
	c := newCLI(t, srv)
	got := c.ok("shares", "pin", "search", "us-east", "60%", "--domain", "shop")
	want := `DC us-east of rule search: pinned at 60.0%
DC        PIN    FLOOR  CEILING  DRAINED
ap-south  -      10.0%  -        no
eu-west   -      -      -        no
us-east   60.0%  -      -        no
`
	if got != want {
		t.Errorf("shares pin: got\n%s\nwant\n%s", got, want)
	}
	w := srv.Writes()
	if len(w) != 1 || w[0].Method != http.MethodPut || w[0].Path != "/rate-limits/search/shares" || w[0].IfMatch != `"4"` {
		t.Fatalf("shares pin: got writes %+v, want one PUT of the shares with If-Match \"4\"", w)
	}
	if want := `{"dcs": {"ap-south": {"floor": 0.1}, "us-east": {"pin": 0.6}}}`; !sameDoc(w[0].Body, want) {
		t.Errorf("shares pin: got body %s, want %s", w[0].Body, want)
	}
}

func TestSharesRetry(t *testing.T) {
	srv := sharesServer(t)
	c := newCLI(t, srv)
	base := srv.HTTPClient().Transport
	gets := 0
	// Another operator drains eu-west after weirctl's first read.
	c.transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(r)
		if r.Method == http.MethodGet && gets == 0 {
			gets++
			srv.SetPolicy("shop", "search", sharepolicy.Policy{DCs: map[string]sharepolicy.DCPolicy{"eu-west": {Drained: true}}})
		}
		return resp, err
	})
	c.ok("shares", "pin", "search", "us-east", "0.5", "--domain", "shop")
	var ifMatch []string
	for _, w := range srv.Writes() {
		ifMatch = append(ifMatch, w.IfMatch)
	}
	if want := []string{`"4"`, `"5"`}; !slices.Equal(ifMatch, want) {
		t.Errorf("got PUTs with If-Match %q, want %q (the first refused, the second after reading again)", ifMatch, want)
	}
	p := srv.Policy("shop", "search")
	if !p.DCs["eu-west"].Drained || p.DCs["us-east"].Pin == nil || *p.DCs["us-east"].Pin != 0.5 {
		t.Errorf("policy: got %+v, want eu-west drained (the other operator's) and us-east pinned at 0.5", p)
	}
}

func TestSharesSettings(t *testing.T) {
	half := 0.5
	tests := []struct {
		name string
		args []string
		want sharepolicy.DCPolicy // eu-west's policy after
		out  string               // the first line of the output
	}{
		{"unpin", []string{"unpin", "search", "eu-west"}, sharepolicy.DCPolicy{Floor: 0.2}, "DC eu-west of rule search: unpinned\n"},
		{"floor", []string{"floor", "search", "eu-west", "0.25"}, sharepolicy.DCPolicy{Pin: &half, Floor: 0.25}, "DC eu-west of rule search: floor at 25.0%\n"},
		{"floor removed", []string{"floor", "search", "eu-west", "0"}, sharepolicy.DCPolicy{Pin: &half}, "DC eu-west of rule search: floor removed\n"},
		{"ceiling", []string{"ceiling", "search", "eu-west", "80%"}, sharepolicy.DCPolicy{Pin: &half, Floor: 0.2, Ceiling: 0.8}, "DC eu-west of rule search: ceiling at 80.0%\n"},
		{"drain", []string{"drain", "search", "eu-west"}, sharepolicy.DCPolicy{Pin: &half, Floor: 0.2, Drained: true}, "DC eu-west of rule search: drained\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := sharesServer(t)
			srv.SetPolicy("shop", "search", sharepolicy.Policy{DCs: map[string]sharepolicy.DCPolicy{"eu-west": {Pin: &half, Floor: 0.2}}})
			got := newCLI(t, srv).ok(append([]string{"shares", "--domain", "shop"}, tt.args...)...)
			if !strings.HasPrefix(got, tt.out) {
				t.Errorf("got\n%s\nwant it to start %q", got, tt.out)
			}
			p := srv.Policy("shop", "search").DCs["eu-west"]
			if !samePolicy(p, tt.want) {
				t.Errorf("eu-west's policy: got %+v, want %+v", p, tt.want)
			}
		})
	}
}

func TestSharesDrainUndo(t *testing.T) {
	srv := sharesServer(t)
	c := newCLI(t, srv)
	c.ok("shares", "drain", "search", "eu-west", "--domain", "shop")
	got := c.ok("shares", "drain", "search", "eu-west", "--undo", "--domain", "shop", "-o", "json")
	var p sharepolicy.Policy
	if err := json.Unmarshal([]byte(got), &p); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.DCs["eu-west"]; ok || p.DCs["ap-south"].Floor != 0.1 {
		t.Errorf("drain --undo -o json: got %s, want eu-west without settings and ap-south's floor", got)
	}
	// Undoing again changes nothing and writes nothing.
	n := len(srv.Writes())
	if got := c.ok("shares", "drain", "search", "eu-west", "--undo", "--domain", "shop"); !strings.Contains(got, "nothing to change") || len(srv.Writes()) != n {
		t.Errorf("second drain --undo: got\n%s\nand %d writes, want nothing to change", got, len(srv.Writes())-n)
	}
}

func TestSharesUnknownDC(t *testing.T) {
	srv := sharesServer(t)
	r := newCLI(t, srv).run("shares", "pin", "search", "mars", "0.5", "--domain", "shop")
	if r.code != 1 || !strings.Contains(r.stderr, `no DC "mars" (its DCs: ap-south, eu-west, us-east)`) || len(srv.Writes()) != 0 {
		t.Errorf("got exit %d, stderr %q, %d writes; want 1, the known DCs and no write", r.code, r.stderr, len(srv.Writes()))
	}
}

func TestStatus(t *testing.T) {
	srv := shopServer(t)
	srv.SetKeyStatus("shop", "login", "john", `{"rule_id": "login", "key": "john", "dcs": [
		{"dc": "eu-west", "limit": 2, "remaining": 1, "window_seconds": 300, "reset_time": "2026-01-02T03:09:05Z"},
		{"dc": "us-east", "limit": 3, "remaining": 3, "window_seconds": 300, "reset_time": "2026-01-02T03:04:05Z"}]}`)
	srv.SetKeyStatus("shop", "login", "jim", `{"rule_id": "login", "key": "jim", "dcs": [
		{"dc": "eu-west", "limit": 2, "remaining": 2, "window_seconds": 300, "reset_time": "2026-01-02T03:04:05Z"},
		{"dc": "ap-south", "limit": 0, "remaining": 0, "window_seconds": 0, "error": "redis unavailable"}]}`)
	c := newCLI(t, srv)
	got := c.ok("status", "login", "john", "--domain", "shop")
	want := `rule login, key john
DC       LIMIT  REMAINING  USED   WINDOW  RESET
eu-west  2      1          50.0%  5m      2026-01-02T03:09:05Z
us-east  3      3          0.0%   5m      2026-01-02T03:04:05Z
all      5      4          20.0%
`
	if got != want {
		t.Errorf("status: got\n%s\nwant\n%s", got, want)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(c.ok("status", "login", "john", "--domain", "shop", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if dcs, _ := doc["dcs"].([]any); doc["key"] != "john" || len(dcs) != 2 {
		t.Errorf("status -o json: got %v", doc)
	}
	got = c.ok("status", "login", "jim", "--domain", "shop")
	want = `rule login, key jim
DC        LIMIT  REMAINING  USED  WINDOW  RESET
eu-west   2      2          0.0%  5m      2026-01-02T03:04:05Z
ap-south  -      -          -     -       unavailable: redis unavailable
`
	if got != want {
		t.Errorf("status with a DC that failed: got\n%s\nwant\n%s", got, want)
	}
	if r := c.run("status", "login", "jane", "--domain", "shop"); r.code != 1 || !strings.Contains(r.stderr, "(HTTP 404)") {
		t.Errorf("status of an unknown key: got exit %d, stderr %q; want 1 and 404", r.code, r.stderr)
	}
}

func TestTop(t *testing.T) {
	srv := shopServer(t)
	srv.SetStats("shop", "api", `{"rule_id": "api", "total_requests": 10000, "rejected_requests": 500, "rejection_rate": 0.05,
		"hot_keys": [{"key": "192.0.2.2", "request_count": 800, "rejection_count": 50},
		             {"key": "192.0.2.1", "request_count": 1200, "rejection_count": 100},
		             {"key": "192.0.2.3", "request_count": 800, "rejection_count": 70}],
		"dcs": {"us-east": {"total_requests": 6000, "rejected_requests": 300}, "eu-west": {"total_requests": 4000, "rejected_requests": 200}},
		"last_updated": "2026-01-02T03:04:05Z"}`)
	c := newCLI(t, srv)
	got := c.ok("top", "api", "--domain", "shop")
	want := `rule api: 10,000 requests, 500 rejected (5.0%), as of 2026-01-02T03:04:05Z
KEY        REQUESTS  OF ALL  REJECTED  REJECTED%
192.0.2.1  1,200     12.0%   100       8.3%
192.0.2.3  800       8.0%    70        8.8%
192.0.2.2  800       8.0%    50        6.2%

DC       REQUESTS  REJECTED  REJECTED%
eu-west  4,000     200       5.0%
us-east  6,000     300       5.0%
`
	if got != want {
		t.Errorf("top: got\n%s\nwant\n%s", got, want)
	}
	var doc struct {
		HotKeys []struct {
			Key string `json:"key"`
		} `json:"hot_keys"`
		Total int `json:"total_requests"`
	}
	if err := json.Unmarshal([]byte(c.ok("top", "api", "-n", "2", "--domain", "shop", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.HotKeys) != 2 || doc.HotKeys[0].Key != "192.0.2.1" || doc.Total != 10000 {
		t.Errorf("top -n 2 -o json: got %+v, want the two busiest keys", doc)
	}
}

func TestAudit(t *testing.T) {
	srv := shopServer(t)
	c := newCLI(t, srv)
	c.ok("apply", "-f", writeFile(t, rulesFile))
	c.ok("shares", "drain", "search", "eu-west", "--domain", "shop")
	got := c.ok("audit", "--limit", "3", "--domain", "shop")
	want := `TIME                  ACTOR  ACTION  DOMAIN  RULE_ID   CHANGES
2026-01-02T03:04:05Z  admin  shares  shop    search    dcs: (unset) → {"eu-west":{"drained":true}}
2026-01-02T03:04:05Z  admin  create  shop    checkout  (new rule)
2026-01-02T03:04:05Z  admin  update  shop    api       description: "per-IP API limit" → (unset); shadow: true → (unset)
`
	if got != want {
		t.Errorf("audit: got\n%s\nwant\n%s", got, want)
	}
	var doc struct {
		Records []map[string]any `json:"records"`
	}
	if err := json.Unmarshal([]byte(c.ok("audit", "--rule", "login", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Records) != 1 || doc.Records[0]["action"] != "update" {
		t.Errorf("audit --rule login -o json: got %v, want login's update", doc.Records)
	}
	if q := srv.Requests()[len(srv.Requests())-1].Query; q.Get("rule_id") != "login" || q.Get("limit") != "20" {
		t.Errorf("audit --rule login: got query %v, want rule_id login and limit 20", q)
	}
}

func TestAuditChanges(t *testing.T) {
	tests := []struct{ name, action, before, after, want string }{
		{"create", "create", `null`, `{"rule_id": "a"}`, "(new rule)"},
		{"delete", "delete", `{"rule_id": "a"}`, `null`, "(deleted)"},
		{"update", "update", `{"rule_id": "a", "limit": 5, "updated_at": "x"}`, `{"rule_id": "a", "limit": 6, "updated_at": "y"}`, "limit: 5 → 6"},
		{"shares", "shares", `{"dcs": {"eu": {"pin": 0.5}, "us": {"floor": 0.1}}}`, `{"dcs": {"eu": {"pin": 0.6}, "us": {"floor": 0.1}, "ap": {"drained": true}}}`,
			`dcs.eu.pin: 0.5 → 0.6; dcs.ap: (unset) → {"drained":true}`},
		{"first policy", "shares", `null`, `{"dcs": {"eu": {"pin": 0.5}}}`, `dcs: (unset) → {"eu":{"pin":0.5}}`},
		{"no change", "update", `{"limit": 5}`, `{"limit": 5.0}`, "-"},
		{"not objects", "update", `[1]`, `{}`, "?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := adminapi.AuditRecord{Action: tt.action, Before: json.RawMessage(tt.before), After: json.RawMessage(tt.after)}
			if got := changes(r); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestServerFromEnvironment(t *testing.T) {
	srv := shopServer(t)
	c := newCLI(t, srv)
	c.env["WEIR_SERVER"] = "http://127.0.0.1:1" // nothing listens there
	if r := c.run("get"); r.code != 1 || !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Errorf("with WEIR_SERVER: got exit %d, stderr %q; want 1 and the server of the environment", r.code, r.stderr)
	}
	if r := c.run("--server", srv.URL, "--domain", "shop", "get"); r.code != 0 {
		t.Errorf("--server over WEIR_SERVER: got exit %d, stderr %q; want 0", r.code, r.stderr)
	}
}

func TestPlainHTTPWarning(t *testing.T) {
	srv := shopServer(t)
	c := newCLI(t, srv)
	base := srv.HTTPClient().Transport
	// Send requests for a remote host to the test server.
	c.transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r.URL.Host = strings.TrimPrefix(srv.URL, "http://")
		return base.RoundTrip(r)
	})
	r := c.run("--server", "http://coord.example:8070", "--domain", "shop", "get")
	if r.code != 0 || !strings.Contains(r.stderr, "warning: the token goes to coord.example:8070 over plain HTTP") {
		t.Errorf("got exit %d, stderr %q; want 0 and a warning", r.code, r.stderr)
	}
	if r := newCLI(t, srv).run("--domain", "shop", "get"); strings.Contains(r.stderr, "warning") {
		t.Errorf("to loopback: got stderr %q, want no warning", r.stderr)
	}
}
