package adminserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/adminclient"
	"github.com/weirhq/weir/pkg/rule"
)

// TestClientRoundTrip checks that the server and the Go client agree on
// every document: for each endpoint, the body the server writes decodes
// strictly into the adminapi type and encodes back to the same bytes (the
// type holds every field the server writes), and the client returns that
// same value.
func TestClientRoundTrip(t *testing.T) {
	e := newEnv(t)
	withAuth(t, e)
	hs := httptest.NewServer(e.h)
	defer hs.Close()
	ctx := context.Background()
	c, err := adminclient.New(hs.URL, writerToken, hs.Client())
	if err != nil {
		t.Fatal(err)
	}
	shop := c.WithDomain("shop")
	if _, err := shop.CreateRule(ctx, mustRule(t, loginRule)); err != nil {
		t.Fatal(err)
	}
	global := `{"rule_id": "orders", "limit": 100, "window_seconds": 60, "scope": "global"}`
	if _, err := shop.CreateRule(ctx, mustRule(t, global)); err != nil {
		t.Fatal(err)
	}
	pin := 0.25
	if _, err := shop.SetShares(ctx, "orders", adminapi.Shares{DCs: []adminapi.DCShare{{DC: "eu-west", Pin: &pin}}}.Policy(), ""); err != nil {
		t.Fatal(err)
	}
	reset := time.Date(2023, 8, 25, 10, 5, 0, 0, time.UTC)
	e.live.stats["shop/user-login-attempt"] = adminapi.RuleStats{
		TotalRequests: 40, RejectedRequests: 10,
		HotKeys:     []adminapi.HotKey{{Key: "john", RequestCount: 30, RejectionCount: 10}},
		DCs:         map[string]adminapi.DCStats{"us-east": {TotalRequests: 40, RejectedRequests: 10}},
		LastUpdated: reset,
	}
	e.live.shares["shop/orders"] = []adminapi.DCShare{{DC: "us-east", Demand: 0.7, Share: 0.75, Target: 0.75, Admitted: 0.6}, {DC: "eu-west", Demand: 0.2, Share: 0.25, Target: 0.25}}
	e.live.keys["shop/user-login-attempt/john"] = []adminapi.DCKeyStatus{
		{DC: "us-east", Limit: 5, Remaining: 2, WindowSeconds: 300, ResetTime: reset},
		{DC: "eu-west", Error: "no limiter answered"},
	}

	tests := []struct {
		name string
		path string
		doc  any // a pointer to a zero value of the document's type
		call func() (any, error)
	}{
		{"rule", "/rate-limits/user-login-attempt?domain=shop", &rule.Rule{}, func() (any, error) {
			r, _, err := shop.GetRule(ctx, "user-login-attempt")
			return r, err
		}},
		{"rule list", "/rate-limits?domain=shop", &adminapi.RuleList{}, func() (any, error) {
			rs, err := shop.ListRules(ctx)
			return adminapi.RuleList{Rules: rs}, err
		}},
		{"stats", "/rate-limits/user-login-attempt/stats?domain=shop", &adminapi.RuleStats{}, func() (any, error) {
			return shop.Stats(ctx, "user-login-attempt")
		}},
		{"shares", "/rate-limits/orders/shares?domain=shop", &adminapi.Shares{}, func() (any, error) {
			return shop.Shares(ctx, "orders")
		}},
		{"key status", "/rate-limits/user-login-attempt/john?domain=shop", &adminapi.KeyStatus{}, func() (any, error) {
			return shop.KeyStatus(ctx, "user-login-attempt", "john")
		}},
		{"audit", "/audit?domain=shop", &adminapi.AuditList{}, func() (any, error) {
			recs, err := shop.Audit(ctx, adminclient.AuditQuery{})
			return adminapi.AuditList{Records: recs}, err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := getRaw(t, hs, tt.path)
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(tt.doc); err != nil {
				t.Fatalf("decode %s into %T: %v", raw, tt.doc, err)
			}
			again, err := json.Marshal(tt.doc)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, bytes.TrimSpace(raw)) {
				t.Errorf("%T encodes differently from the server:\ngot  %s\nwant %s", tt.doc, again, raw)
			}
			got, err := tt.call()
			if err != nil {
				t.Fatal(err)
			}
			if want := reflect.ValueOf(tt.doc).Elem().Interface(); !reflect.DeepEqual(got, want) {
				t.Errorf("client decoded\n%+v\nwant what the server wrote\n%+v", got, want)
			}
		})
	}

	t.Run("error", func(t *testing.T) {
		_, err := shop.UpdateRule(ctx, "user-login-attempt", map[string]any{"limit": "many", "limt": 1}, "")
		var ae *adminclient.APIError
		if !errors.As(err, &ae) {
			t.Fatalf("got %v, want an *APIError", err)
		}
		req, _ := http.NewRequest(http.MethodPut, hs.URL+"/rate-limits/user-login-attempt?domain=shop", bytes.NewReader([]byte(`{"limit": "many", "limt": 1}`)))
		req.Header.Set("Authorization", "Bearer "+writerToken)
		var body adminapi.ErrorBody
		_, raw := do(t, hs, req)
		decodeStrict(t, raw, &body)
		got := adminapi.ErrorBody{Error: ae.Message, Fields: ae.Fields, Omitted: ae.Omitted, Leader: ae.Leader}
		if ae.Status != http.StatusUnprocessableEntity || !reflect.DeepEqual(got, body) {
			t.Errorf("client's error: got %d %+v, want 422 %+v", ae.Status, got, body)
		}
	})
}

func mustRule(t *testing.T, doc string) rule.Rule {
	t.Helper()
	r, err := rule.ParseRule([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// getRaw returns the body of a GET of path, with the writer's token,
// failing t unless it is 200.
func getRaw(t *testing.T, hs *httptest.Server, path string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, hs.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+writerToken)
	code, body := do(t, hs, req)
	if code != http.StatusOK {
		t.Fatalf("GET %s: got %d %s, want 200", path, code, body)
	}
	return body
}

// do sends req and returns the answer's status and body.
func do(t *testing.T, hs *httptest.Server, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func decodeStrict(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := jsonDecode(data, v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
}
