package adminserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/internal/platform/auth"
	"github.com/weirhq/weir/pkg/adminapi"
)

const (
	writerToken = "writer-token-0123456789-SECRET"
	readerToken = "reader-token-0123456789-SECRET"
)

// withAuth puts auth.Middleware with a writer's and a reader's token in
// front of e's server.
func withAuth(t testing.TB, e *env) {
	toks, err := auth.Parse([]byte(writerToken + " rw alice\n" + readerToken + " ro grafana\n"))
	if err != nil {
		t.Fatal(err)
	}
	e.h = auth.Middleware(toks, e.srv)
}

func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

func TestAuditTrail(t *testing.T) {
	e := newEnv(t)
	withAuth(t, e)
	as := bearer(writerToken)
	step := func(method, target, body string) {
		t.Helper()
		e.clock.Advance(time.Second)
		rec := e.do(method, target, body, as...)
		if rec.Code != 200 && rec.Code != 201 {
			t.Fatalf("%s %s: got %d %s", method, target, rec.Code, rec.Body)
		}
	}
	step("POST", "/rate-limits", seedCreate)
	step("PUT", "/rate-limits/api-global-default", seedUpdate)
	step("PUT", "/rate-limits/api-global-default/shares", `{"dcs": {"us-east": {"pin": 0.5}}}`)
	step("PUT", "/rate-limits/api-global-default/shares", `{"dcs": {}}`)
	step("POST", "/rate-limits?domain=shop", loginRule)
	step("DELETE", "/rate-limits/api-global-default", "")
	// Refused changes leave no record.
	e.do("POST", "/rate-limits", `{}`, as...)
	e.do("DELETE", "/rate-limits/nope", "", as...)

	recs := e.audit()
	type summary struct{ action, domain, rule, actor string }
	var got []summary
	for _, r := range recs {
		got = append(got, summary{r.Action, r.Domain, r.RuleID, r.Actor})
	}
	wantSum := []summary{
		{"create", "default", "api-global-default", "alice"},
		{"update", "default", "api-global-default", "alice"},
		{"shares", "default", "api-global-default", "alice"},
		{"shares", "default", "api-global-default", "alice"},
		{"create", "shop", "user-login-attempt", "alice"},
		{"delete", "default", "api-global-default", "alice"},
	}
	if !reflect.DeepEqual(got, wantSum) {
		t.Fatalf("records:\ngot  %v\nwant %v", got, wantSum)
	}
	idRE := regexp.MustCompile(`^[0-9]{20}-[0-9a-f]{8}$`)
	for i, r := range recs {
		if !idRE.MatchString(r.ID) {
			t.Errorf("record %d: id %q is not 20 digits, '-' and 8 hex digits", i, r.ID)
		}
		wantTime := t0.Add(time.Duration(i+1) * time.Second)
		if !r.Time.Equal(wantTime) || r.ID[:20] != fmt.Sprintf("%020d", wantTime.UnixNano()) {
			t.Errorf("record %d: time %v, id %s; want %v", i, r.Time, r.ID, wantTime)
		}
	}
	// Before and after: absent is null; each change starts where the
	// previous one of the same document ended.
	isNull := func(m json.RawMessage) bool { return m == nil || string(m) == "null" }
	if !isNull(recs[0].Before) || !strings.Contains(string(recs[0].After), `"limit":100`) {
		t.Errorf("create: before %s, after %s", recs[0].Before, recs[0].After)
	}
	if string(recs[1].Before) != string(recs[0].After) || !strings.Contains(string(recs[1].After), `"limit":150`) {
		t.Errorf("update: before %s, after %s", recs[1].Before, recs[1].After)
	}
	if !isNull(recs[2].Before) || string(recs[2].After) != `{"dcs":{"us-east":{"pin":0.5}}}` {
		t.Errorf("shares: before %s, after %s", recs[2].Before, recs[2].After)
	}
	if string(recs[3].Before) != string(recs[2].After) || string(recs[3].After) != `{"dcs":{}}` {
		t.Errorf("shares again: before %s, after %s", recs[3].Before, recs[3].After)
	}
	if string(recs[5].Before) != string(recs[1].After) || !isNull(recs[5].After) {
		t.Errorf("delete: before %s, after %s", recs[5].Before, recs[5].After)
	}

	// GET /audit: newest first, limited, filtered; readers may read it.
	list := func(query string) []string {
		t.Helper()
		rec := e.do("GET", "/audit"+query, "", bearer(readerToken)...)
		want(t, rec, 200)
		var l adminapi.AuditList
		if err := jsonDecode(rec.Body.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range l.Records {
			out = append(out, r.Action+" "+r.RuleID)
		}
		return out
	}
	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{"delete api-global-default", "create user-login-attempt", "shares api-global-default", "shares api-global-default", "update api-global-default", "create api-global-default"}},
		{"?limit=2", []string{"delete api-global-default", "create user-login-attempt"}},
		{"?limit=5000", []string{"delete api-global-default", "create user-login-attempt", "shares api-global-default", "shares api-global-default", "update api-global-default", "create api-global-default"}},
		{"?rule_id=user-login-attempt", []string{"create user-login-attempt"}},
		{"?rule_id=api-global-default&limit=3", []string{"delete api-global-default", "shares api-global-default", "shares api-global-default"}},
		{"?domain=shop", []string{"create user-login-attempt"}},
		{"?rule_id=api-global-default&domain=shop", nil},
	}
	for _, tt := range tests {
		if got := list(tt.query); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("GET /audit%s:\ngot  %q\nwant %q", tt.query, got, tt.want)
		}
	}
	for _, q := range []string{"?limit=0", "?limit=-1", "?limit=x"} {
		wantError(t, e.do("GET", "/audit"+q, "", as...), 400, "not a positive integer")
	}

	// Each change was logged once, with its actor and never a token.
	logs := e.logs.String()
	if n := strings.Count(logs, `msg="admin change"`); n != 6 {
		t.Errorf("got %d change lines in the log, want 6:\n%s", n, logs)
	}
	if !strings.Contains(logs, "actor=alice action=delete domain=default rule=api-global-default") {
		t.Errorf("log lacks the delete:\n%s", logs)
	}
	if strings.Contains(logs, "SECRET") {
		t.Errorf("the log holds a token:\n%s", logs)
	}
}

// TestAuditSameTransaction checks that a change and its record are one
// etcd revision: written in one transaction.
func TestAuditSameTransaction(t *testing.T) {
	e := newEnv(t)
	e.create(seedCreate)
	e.clock.Advance(time.Millisecond)
	e.do("PUT", "/rate-limits/api-global-default/shares", `{"dcs": {}}`)
	resp, err := e.cli.Get(context.Background(), e.layout.Audit(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 2 {
		t.Fatalf("got %d records, want 2", len(resp.Kvs))
	}
	_, ruleRev := e.get(e.layout.Rule("default", "api-global-default"))
	_, polRev := e.get(e.layout.Policy("default", "api-global-default"))
	if resp.Kvs[0].ModRevision != ruleRev || resp.Kvs[1].ModRevision != polRev {
		t.Errorf("records at revisions %d and %d, changes at %d and %d", resp.Kvs[0].ModRevision, resp.Kvs[1].ModRevision, ruleRev, polRev)
	}
	if recs := e.audit(); recs[0].Actor != "anonymous" {
		t.Errorf("actor without a principal: got %q, want anonymous", recs[0].Actor)
	}
}

func TestAuditRetention(t *testing.T) {
	e := newEnv(t, func(c *adminserver.Config) { c.AuditRetention = 5 })
	e.create(seedCreate)
	for i := range 11 {
		e.clock.Advance(time.Second)
		want(t, e.do("PUT", "/rate-limits/api-global-default", `{"limit": `+strconv.Itoa(i+1)+`}`), 200)
	}
	recs := e.audit()
	if len(recs) != 5 {
		t.Fatalf("got %d records, want 5", len(recs))
	}
	for i, r := range recs {
		if want := `"limit":` + strconv.Itoa(7+i) + `,`; !strings.Contains(string(r.After), want) {
			t.Errorf("record %d: after %s, want the change to %s", i, r.After, want)
		}
	}
	// Records written behind the server's back (another version, a
	// restore) are trimmed too, the oldest first, a bounded batch at a
	// time.
	for i := range 1500 {
		e.put(e.layout.Audit()+"0000000000"+strconv.Itoa(1_000_000_000+i)+"-00000000", `{}`)
	}
	e.clock.Advance(time.Second)
	want(t, e.do("PUT", "/rate-limits/api-global-default", `{"limit": 100}`), 200)
	resp, err := e.cli.Get(context.Background(), e.layout.Audit(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 1506-1000 {
		t.Errorf("after one change: %d records, want 506 (1,000 trimmed)", resp.Count)
	}
	e.clock.Advance(time.Second)
	want(t, e.do("PUT", "/rate-limits/api-global-default", `{"limit": 101}`), 200)
	recs = e.audit()
	if len(recs) != 5 || !strings.Contains(string(recs[4].After), `"limit":101`) {
		t.Errorf("after two changes: %d records, the newest %s", len(recs), recs[len(recs)-1].After)
	}
}

func TestAuthInFront(t *testing.T) {
	e := newEnv(t)
	withAuth(t, e)
	tests := []struct {
		name, method, target, body string
		hdr                        []string
		code                       int
	}{
		{"no token", "GET", "/rate-limits", "", nil, 401},
		{"unknown token", "GET", "/rate-limits", "", bearer("nope-nope-nope-nope-nope"), 401},
		{"no token, write", "POST", "/rate-limits", seedCreate, nil, 401},
		{"reader writes", "POST", "/rate-limits", seedCreate, bearer(readerToken), 403},
		{"writer writes", "POST", "/rate-limits", seedCreate, bearer(writerToken), 201},
		{"reader reads", "GET", "/rate-limits/api-global-default", "", bearer(readerToken), 200},
		{"reader updates", "PUT", "/rate-limits/api-global-default", seedUpdate, bearer(readerToken), 403},
		{"reader pins", "PUT", "/rate-limits/api-global-default/shares", `{"dcs": {}}`, bearer(readerToken), 403},
		{"reader deletes", "DELETE", "/rate-limits/api-global-default", "", bearer(readerToken), 403},
		{"reader reads audit", "GET", "/audit", "", bearer(readerToken), 200},
		{"writer updates", "PUT", "/rate-limits/api-global-default", seedUpdate, bearer(writerToken), 200},
		{"writer deletes", "DELETE", "/rate-limits/api-global-default", "", bearer(writerToken), 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := e.do(tt.method, tt.target, tt.body, tt.hdr...)
			want(t, rec, tt.code)
			if strings.Contains(rec.Body.String(), "SECRET") {
				t.Errorf("the answer holds a token: %s", rec.Body)
			}
		})
	}
	if n := len(e.audit()); n != 3 {
		t.Errorf("got %d audit records, want 3", n)
	}
}

func TestRouting(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		method, target string
		code           int
		allow          string
	}{
		{"GET", "/", 404, ""},
		{"GET", "/nope", 404, ""},
		{"GET", "/rate-limits/", 404, ""},
		{"GET", "/audit/x", 404, ""},
		{"PATCH", "/rate-limits", 405, "GET, HEAD, POST"},
		{"DELETE", "/rate-limits", 405, "GET, HEAD, POST"},
		{"POST", "/rate-limits/x", 405, "DELETE, GET, HEAD, PUT"},
		{"POST", "/rate-limits/x/shares", 405, "GET, HEAD, PUT"},
		{"PUT", "/rate-limits/x/stats", 405, "GET, HEAD"},
		{"POST", "/audit", 405, "GET, HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			rec := e.do(tt.method, tt.target, "")
			wantError(t, rec, tt.code, "")
			if got := rec.Header().Get("Allow"); got != tt.allow {
				t.Errorf("Allow: got %q, want %q", got, tt.allow)
			}
		})
	}
	rec := e.do("GET", "/rate-limits/../audit", "")
	if rec.Code/100 != 3 || rec.Header().Get("Location") != "/audit" {
		t.Errorf("unclean path: got %d to %q, want a redirect to /audit", rec.Code, rec.Header().Get("Location"))
	}
}
