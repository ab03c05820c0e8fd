package adminserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/internal/testkit/syncbuf"
	"github.com/weirhq/weir/pkg/adminapi"
)

// The seed's documents (seed 003, §5).
const (
	seedCreate = `{
"rule_id": "api-global-default",
"path_pattern": "/api/v1/**",
"key_type": "ip",
"limit": 100,
"window_seconds": 60,
"algorithm": "SlidingWindowCounter",
"enabled": true
}`
	seedUpdate = `{
"limit": 150,
"window_seconds": 60,
"enabled": true
}`
	loginRule = `{"rule_id": "user-login-attempt", "path_pattern": "/auth/login", "key_type": "username",
 "limit": 5, "window_seconds": 300, "algorithm": "SlidingWindowLog", "enabled": true}`
	localRule = `{"rule_id": "per-dc", "limit": 10, "window_seconds": 1, "scope": "local"}`
)

// t0 is the test clock's first time.
var t0 = time.Date(2023, 8, 25, 10, 0, 0, 0, time.UTC)

// env is an admin API over a real embedded etcd.
type env struct {
	t      testing.TB
	cli    *clientv3.Client
	layout etcdlayout.Layout
	clock  *fakeclock.Clock
	live   *memLive
	logs   *syncbuf.Buffer
	srv    *adminserver.Server
	h      http.Handler
}

var sharedDCs = []string{"us-east", "eu-west", "ap-south"}

// newEnv starts an etcd and an admin API over it; opts adjust the config.
func newEnv(t testing.TB, opts ...func(*adminserver.Config)) *env {
	t.Helper()
	cli := etcdtest.Start(t).Client(t)
	e := &env{t: t, cli: cli, layout: etcdlayout.Layout{Prefix: "/test/"}, clock: fakeclock.New(t0),
		live: newMemLive(), logs: &syncbuf.Buffer{}}
	cfg := adminserver.Config{
		Etcd:   cli,
		Layout: e.layout,
		DCs:    sharedDCs,
		Live:   e.live,
		Now:    e.clock.Now,
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := adminserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv, e.h = srv, srv
	return e
}

// with returns a copy of e that reports to t (a fuzz target's).
func (e *env) with(t testing.TB) *env {
	c := *e
	c.t = t
	return &c
}

// unknownLength, as a header name for do, sends the body without a
// Content-Length.
const unknownLength = "X-Test-Unknown-Length"

// do sends a request; hdr are header name, value pairs.
func (e *env) do(method, target, body string, hdr ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	var req *http.Request
	if rd != nil {
		req = httptest.NewRequest(method, target, rd)
	} else {
		req = httptest.NewRequest(method, target, nil)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == unknownLength {
			req.ContentLength = -1
			continue
		}
		req.Header.Add(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// want checks a response's status and that it is JSON.
func want(t testing.TB, rec *httptest.ResponseRecorder, code int) {
	t.Helper()
	if rec.Code != code {
		t.Fatalf("got %d %s, want %d", rec.Code, rec.Body, code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", ct)
	}
	if !json.Valid(rec.Body.Bytes()) {
		t.Errorf("body %q is not JSON", rec.Body)
	}
}

// wantError checks an error response: its status, and a JSON body whose
// "error" contains msg.
func wantError(t testing.TB, rec *httptest.ResponseRecorder, code int, msg string) adminapi.ErrorBody {
	t.Helper()
	want(t, rec, code)
	var body adminapi.ErrorBody
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("error body: %v", err)
	}
	if body.Error == "" || !strings.Contains(body.Error, msg) {
		t.Errorf("error: got %q, want it to contain %q", body.Error, msg)
	}
	return body
}

// decode decodes a JSON response body into a map.
func decode(t testing.TB, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return m
}

// get reads a key from etcd; rev is 0 when it is absent.
func (e *env) get(key string) (value string, rev int64) {
	e.t.Helper()
	resp, err := e.cli.Get(context.Background(), key)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].ModRevision
}

// put writes a key to etcd.
func (e *env) put(key, value string) {
	e.t.Helper()
	if _, err := e.cli.Put(context.Background(), key, value); err != nil {
		e.t.Fatal(err)
	}
}

// create creates a rule through the API.
func (e *env) create(body string, query ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	target := "/rate-limits"
	if len(query) > 0 {
		target += "?" + query[0]
	}
	rec := e.do("POST", target, body)
	want(e.t, rec, http.StatusCreated)
	return rec
}

// audit returns the audit records in etcd, oldest first.
func (e *env) audit() []adminapi.AuditRecord {
	e.t.Helper()
	resp, err := e.cli.Get(context.Background(), e.layout.Audit(), clientv3.WithPrefix())
	if err != nil {
		e.t.Fatal(err)
	}
	out := make([]adminapi.AuditRecord, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		if err := json.Unmarshal(kv.Value, &out[i]); err != nil {
			e.t.Fatal(err)
		}
		if got, want := string(kv.Key), e.layout.Audit()+out[i].ID; got != want {
			e.t.Errorf("audit key %q holds record %q", got, out[i].ID)
		}
	}
	return out
}

// memLive is an in-memory Live for tests: fixed answers per rule, or err.
type memLive struct {
	mu     sync.Mutex
	stats  map[string]adminapi.RuleStats
	shares map[string][]adminapi.DCShare
	keys   map[string][]adminapi.DCKeyStatus
	err    error
}

var _ adminserver.Live = (*memLive)(nil)

func newMemLive() *memLive {
	return &memLive{stats: map[string]adminapi.RuleStats{}, shares: map[string][]adminapi.DCShare{}, keys: map[string][]adminapi.DCKeyStatus{}}
}

func (l *memLive) setErr(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

func (l *memLive) Stats(_ context.Context, domain, ruleID string) (adminapi.RuleStats, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, ok := l.stats[domain+"/"+ruleID]
	if l.err != nil {
		return adminapi.RuleStats{}, l.err
	}
	if !ok {
		return adminapi.RuleStats{}, fmt.Errorf("stats of %s/%s: %w", domain, ruleID, adminserver.ErrUnknown)
	}
	return st, nil
}

func (l *memLive) Shares(_ context.Context, domain, ruleID string) ([]adminapi.DCShare, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sh, ok := l.shares[domain+"/"+ruleID]
	if l.err != nil {
		return nil, l.err
	}
	if !ok {
		return nil, adminserver.ErrUnknown
	}
	return sh, nil
}

func (l *memLive) KeyStatus(_ context.Context, domain, ruleID, key string) ([]adminapi.DCKeyStatus, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ks, ok := l.keys[domain+"/"+ruleID+"/"+key]
	if l.err != nil {
		return nil, l.err
	}
	if !ok {
		return nil, adminserver.ErrUnknown
	}
	return ks, nil
}

// jsonDecode decodes data into v strictly.
func jsonDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
