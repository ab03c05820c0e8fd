package adminclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/testkit/adminclienttest"
	"github.com/weirhq/weir/internal/testkit/deadpeer"
	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/adminclient"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/sharepolicy"
)

const loginDoc = `{"rule_id": "login", "path_pattern": "/auth/login", "key_type": "username",
	"limit": 5, "window_seconds": 300, "algorithm": "SlidingWindowLog"}`

func newClient(t *testing.T, srv *adminclienttest.Server, token string) *adminclient.Client {
	t.Helper()
	c, err := adminclient.New(srv.URL, token, srv.HTTPClient())
	if err != nil {
		t.Fatal(err)
	}
	return c.WithDomain("shop")
}

func mustParse(t *testing.T, doc string) rule.Rule {
	t.Helper()
	r, err := rule.ParseRule([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNew(t *testing.T) {
	tests := []struct {
		name, url string
		wantErr   string
	}{
		{"http", "http://127.0.0.1:8070", ""},
		{"https with prefix", "https://coord.example/weir/", ""},
		{"no scheme", "127.0.0.1:8070", "want http:// or https://"},
		{"ftp", "ftp://x", "want http:// or https://"},
		{"no host", "http:///x", "has no host"},
		{"credentials", "http://u:p@host", "carries credentials"},
		{"query", "http://host/?a=b", "want no query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := adminclient.New(tt.url, "tok", nil)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), ":p@") {
				t.Errorf("error %q shows the URL's password", err)
			}
		})
	}
}

func TestRules(t *testing.T) {
	ctx := context.Background()
	srv := adminclienttest.New(t, nil, "eu", "us")
	c := newClient(t, srv, adminclienttest.AdminToken)

	created, err := c.CreateRule(ctx, mustParse(t, loginDoc))
	if err != nil {
		t.Fatal(err)
	}
	if created.ID != "login" || created.Limit != 5 || created.CreatedAt.IsZero() {
		t.Errorf("CreateRule: got %+v, want login with limit 5 and created_at", created)
	}
	if _, err := c.CreateRule(ctx, mustParse(t, loginDoc)); !errors.Is(err, adminclient.ErrConflict) {
		t.Errorf("CreateRule again: got %v, want ErrConflict", err)
	}

	got, etag, err := c.GetRule(ctx, "login")
	if err != nil {
		t.Fatal(err)
	}
	if got.PathPattern != "/auth/login" || etag == "" {
		t.Errorf("GetRule: got %+v, etag %q; want the rule and an etag", got, etag)
	}

	updated, err := c.UpdateRule(ctx, "login", map[string]any{"limit": 10, "description": "login attempts"}, etag)
	if err != nil {
		t.Fatal(err)
	}
	if updated.Limit != 10 || updated.Description != "login attempts" || updated.KeyType[0] != "username" {
		t.Errorf("UpdateRule: got %+v, want limit 10, the description and the other fields kept", updated)
	}
	if _, err := c.UpdateRule(ctx, "login", map[string]any{"limit": 11}, etag); !errors.Is(err, adminclient.ErrPrecondition) {
		t.Errorf("UpdateRule with a stale ETag: got %v, want ErrPrecondition", err)
	}
	// A null removes a field.
	updated, err = c.UpdateRule(ctx, "login", map[string]any{"description": nil}, "")
	if err != nil || updated.Description != "" {
		t.Errorf("UpdateRule removing description: got %q, %v; want it empty", updated.Description, err)
	}

	list, err := c.ListRules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != "login" {
		t.Errorf("ListRules: got %v, want [login]", list)
	}
	if other, err := c.WithDomain("other").ListRules(ctx); err != nil || len(other) != 0 {
		t.Errorf("ListRules of another domain: got %v, %v; want none", other, err)
	}

	msg, err := c.DeleteRule(ctx, "login")
	if err != nil || msg != "Rate limit rule 'login' deleted successfully." {
		t.Errorf("DeleteRule: got %q, %v", msg, err)
	}
	if _, _, err := c.GetRule(ctx, "login"); !errors.Is(err, adminclient.ErrNotFound) {
		t.Errorf("GetRule after delete: got %v, want ErrNotFound", err)
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	srv := adminclienttest.New(t, nil, "eu", "us")
	srv.AddRule(t, "shop", loginDoc)
	tests := []struct {
		name     string
		token    string
		call     func(c *adminclient.Client) error
		want     error
		status   int
		contains string
	}{
		{"no token", "", func(c *adminclient.Client) error { _, err := c.ListRules(ctx); return err },
			adminclient.ErrUnauthorized, 401, "invalid bearer token"},
		{"wrong token", "nope", func(c *adminclient.Client) error { _, err := c.ListRules(ctx); return err },
			adminclient.ErrUnauthorized, 401, ""},
		{"read-only write", adminclienttest.ReadOnlyToken, func(c *adminclient.Client) error { _, err := c.DeleteRule(ctx, "login"); return err },
			adminclient.ErrForbidden, 403, ""},
		{"unknown rule", adminclienttest.AdminToken, func(c *adminclient.Client) error { _, err := c.Stats(ctx, "nope"); return err },
			adminclient.ErrNotFound, 404, `"nope" not found`},
		{"invalid update", adminclienttest.AdminToken, func(c *adminclient.Client) error {
			_, err := c.UpdateRule(ctx, "login", map[string]any{"limit": "many", "limt": 1}, "")
			return err
		}, adminclient.ErrInvalid, 422, "limit: "},
		{"rename", adminclienttest.AdminToken, func(c *adminclient.Client) error {
			_, err := c.UpdateRule(ctx, "login", map[string]any{"rule_id": "other"}, "")
			return err
		}, adminclient.ErrConflict, 409, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(newClient(t, srv, tt.token))
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			var ae *adminclient.APIError
			if !errors.As(err, &ae) || ae.Status != tt.status {
				t.Fatalf("got %#v, want an *APIError with status %d", err, tt.status)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("got %q, want it to contain %q", err, tt.contains)
			}
			if tt.token != "" && strings.Contains(err.Error(), tt.token) {
				t.Errorf("error %q shows the token", err)
			}
		})
	}
	t.Run("invalid fields", func(t *testing.T) {
		_, err := newClient(t, srv, adminclienttest.AdminToken).UpdateRule(ctx, "login", map[string]any{"limit": "many", "limt": 1}, "")
		var ae *adminclient.APIError
		errors.As(err, &ae)
		var fields []string
		for _, f := range ae.Fields {
			fields = append(fields, f.Field)
		}
		if want := []string{"limit", "limt"}; !slices.Equal(fields, want) {
			t.Errorf("got fields %v, want %v", fields, want)
		}
	})
}

func TestErrorBodies(t *testing.T) {
	tests := []struct {
		name, body string
		status     int
		want       string
	}{
		{"api error", `{"error": "not the leader"}`, 503, "not the leader (HTTP 503)"},
		{"leader", `{"error": "not the leader", "leader": "http://b:8070"}`, 503, "not the leader (HTTP 503); the leader is http://b:8070"},
		{"omitted", `{"error": "invalid rule", "fields": [{"field": "a", "reason": "b"}], "omitted": 3}`, 422, "invalid rule (HTTP 422)\n  a: b\n  and 3 more"},
		{"text from a proxy", "upstream connect error", 502, "upstream connect error (HTTP 502)"},
		{"empty", "", 500, "internal server error (HTTP 500)"},
		{"html", "<html>" + strings.Repeat("x", 300) + "</html>", 404, "not found (HTTP 404)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer hs.Close()
			c, _ := adminclient.New(hs.URL, "secret-token", nil)
			_, err := c.ListRules(context.Background())
			if err == nil || !strings.HasSuffix(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error ending %q", err, tt.want)
			}
		})
	}
}

func TestTransportErrorHidesToken(t *testing.T) {
	c, _ := adminclient.New(deadpeer.URL(t), "secret-token", nil)
	_, err := c.ListRules(context.Background())
	if err == nil || strings.Contains(err.Error(), "secret-token") {
		t.Fatalf("got %v, want an error that does not show the token", err)
	}
}

func TestPaths(t *testing.T) {
	var got []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.EscapedPath()+"?"+r.URL.RawQuery)
		w.Write([]byte(`{}`))
	}))
	defer hs.Close()
	ctx := context.Background()
	tests := []struct {
		name, base, domain string
		call               func(c *adminclient.Client) error
		want               string
	}{
		{"key with slash and pipe", hs.URL, "shop", func(c *adminclient.Client) error {
			_, err := c.KeyStatus(ctx, "tenant-user", "acme|a/b")
			return err
		}, "/rate-limits/tenant-user/acme%7Ca%2Fb?domain=shop"},
		{"dot key", hs.URL, "", func(c *adminclient.Client) error { _, err := c.KeyStatus(ctx, "r", ".."); return err },
			"/rate-limits/r/%2E%2E?"},
		{"prefix", hs.URL + "/weir/", "", func(c *adminclient.Client) error { _, err := c.Stats(ctx, "r"); return err },
			"/weir/rate-limits/r/stats?"},
		{"audit", hs.URL, "shop", func(c *adminclient.Client) error {
			_, err := c.Audit(ctx, adminclient.AuditQuery{RuleID: "r", Limit: 5})
			return err
		}, "/audit?domain=shop&limit=5&rule_id=r"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = nil
			c, err := adminclient.New(tt.base, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.call(c.WithDomain(tt.domain)); err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("got %q, want [%s]", got, tt.want)
			}
		})
	}
}

func TestLive(t *testing.T) {
	ctx := context.Background()
	srv := adminclienttest.New(t, nil, "eu", "us")
	srv.AddRule(t, "shop", loginDoc)
	srv.SetStats("shop", "login", `{"rule_id": "login", "total_requests": 10000, "rejected_requests": 500,
		"rejection_rate": 0.05, "hot_keys": [{"key": "john", "request_count": 1200, "rejection_count": 100}],
		"dcs": {"eu": {"total_requests": 4000, "rejected_requests": 100}}, "last_updated": "2026-01-02T03:04:05Z"}`)
	srv.SetKeyStatus("shop", "login", "john", `{"rule_id": "login", "key": "john", "dcs": [
		{"dc": "eu", "limit": 2, "remaining": 1, "window_seconds": 300, "reset_time": "2026-01-02T03:09:05Z"}]}`)
	srv.SetLive("shop", "login", "eu", adminclienttest.Live{Demand: 0.4, Share: 0.45, Target: 0.45, Admitted: 0.39})
	c := newClient(t, srv, adminclienttest.AdminToken)

	st, err := c.Stats(ctx, "login")
	if err != nil {
		t.Fatal(err)
	}
	if st.TotalRequests != 10000 || st.RejectionRate != 0.05 || len(st.HotKeys) != 1 || st.HotKeys[0].RejectionCount != 100 ||
		st.DCs["eu"].TotalRequests != 4000 || st.LastUpdated.IsZero() {
		t.Errorf("Stats: got %+v", st)
	}

	ks, err := c.KeyStatus(ctx, "login", "john")
	if err != nil {
		t.Fatal(err)
	}
	if len(ks.DCs) != 1 || ks.DCs[0].Remaining != 1 || ks.DCs[0].ResetTime.IsZero() {
		t.Errorf("KeyStatus: got %+v", ks)
	}

	sh, err := c.Shares(ctx, "login")
	if err != nil {
		t.Fatal(err)
	}
	if len(sh.DCs) != 2 || sh.DCs[0].Share != 0.45 || sh.DCs[0].Pin != nil || sh.ETag == "" {
		t.Fatalf("Shares: got %+v", sh)
	}
	if p := sh.Policy(); len(p.DCs) != 0 {
		t.Errorf("Policy of no settings: got %+v, want none", p)
	}
	pin := 0.5
	want := sharepolicy.Policy{DCs: map[string]sharepolicy.DCPolicy{"eu": {Pin: &pin}, "us": {Floor: 0.1, Ceiling: 0.8}}}
	stored, err := c.SetShares(ctx, "login", want, sh.ETag)
	if err != nil {
		t.Fatal(err)
	}
	if *stored.DCs["eu"].Pin != 0.5 || stored.DCs["us"].Ceiling != 0.8 {
		t.Errorf("SetShares: got %+v, want %+v", stored, want)
	}
	if _, err := c.SetShares(ctx, "login", want, sh.ETag); !errors.Is(err, adminclient.ErrPrecondition) {
		t.Errorf("SetShares with a stale ETag: got %v, want ErrPrecondition", err)
	}
	sh, _ = c.Shares(ctx, "login")
	if got := sh.Policy(); *got.DCs["eu"].Pin != 0.5 || got.DCs["us"].Floor != 0.1 || len(got.DCs) != 2 {
		t.Errorf("Policy after SetShares: got %+v, want %+v", got, want)
	}
	bad := sharepolicy.Policy{DCs: map[string]sharepolicy.DCPolicy{"mars": {Drained: true}}}
	if _, err := c.SetShares(ctx, "login", bad, ""); !errors.Is(err, adminclient.ErrInvalid) {
		t.Errorf("SetShares for an unknown DC: got %v, want ErrInvalid", err)
	}

	srv.SetLeader(false, "http://leader.example:8070")
	_, err = c.Shares(ctx, "login")
	var ae *adminclient.APIError
	if !errors.Is(err, adminclient.ErrUnavailable) || !errors.As(err, &ae) || ae.Leader != "http://leader.example:8070" {
		t.Errorf("Shares from a follower: got %v, want ErrUnavailable naming the leader", err)
	}
}

func TestAudit(t *testing.T) {
	ctx := context.Background()
	srv := adminclienttest.New(t, nil, "eu")
	c := newClient(t, srv, adminclienttest.AdminToken)
	for _, doc := range []string{loginDoc, `{"rule_id": "api", "limit": 100, "window_seconds": 60}`} {
		if _, err := c.CreateRule(ctx, mustParse(t, doc)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.UpdateRule(ctx, "login", map[string]any{"limit": 6}, ""); err != nil {
		t.Fatal(err)
	}
	recs, err := c.Audit(ctx, adminclient.AuditQuery{RuleID: "login", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range recs {
		actions = append(actions, r.Action+" "+r.RuleID+" by "+r.Actor)
	}
	if want := []string{"update login by admin", "create login by admin"}; !slices.Equal(actions, want) {
		t.Errorf("got %q, want %q", actions, want)
	}
	var before map[string]any
	if err := json.Unmarshal(recs[0].Before, &before); err != nil || before["limit"] != 5.0 {
		t.Errorf("before of the update: got %s, want limit 5", recs[0].Before)
	}
}

// TestWarnings checks the contract of WithWarnings on answers a server
// could send: every Weir-Warning field, in order and unsplit, of answers
// 2xx or not; none when there are none. TestClientWarnings, in package
// adminserver, checks it against the real server.
func TestWarnings(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		warnings []string
		body     string
	}{
		{"none", http.StatusOK, nil, `{"message": "deleted"}`},
		{"one", http.StatusOK, []string{"every DC is drained"}, `{"message": "deleted"}`},
		{"several, with commas", http.StatusOK, []string{"first, with a comma", "second"}, `{"message": "deleted"}`},
		{"on an error", http.StatusNotFound, []string{"look elsewhere"}, `{"error": "no such rule"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for _, v := range tt.warnings {
					w.Header().Add(adminapi.HeaderWarning, v)
				}
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer hs.Close()
			c, err := adminclient.New(hs.URL, "", hs.Client())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			_, err = c.WithWarnings(func(w string) { got = append(got, w) }).DeleteRule(context.Background(), "r")
			if wantErr := tt.status != http.StatusOK; (err != nil) != wantErr {
				t.Errorf("got error %v, want one: %v", err, wantErr)
			}
			if !slices.Equal(got, tt.warnings) {
				t.Errorf("warnings: got %q, want %q", got, tt.warnings)
			}
			// The client it was made from is unchanged and drops them.
			got = nil
			c.DeleteRule(context.Background(), "r")
			if got != nil {
				t.Errorf("client without WithWarnings: got %q, want nothing reported", got)
			}
		})
	}
}
