package adminserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/document"
	"github.com/weirhq/weir/pkg/rule"
)

// fuzzMaxBody is small, so that 413 is within the fuzzers' reach.
const fuzzMaxBody = 4 << 10

func fuzzEnv(f *testing.F) *env {
	return newEnv(f, func(c *adminserver.Config) {
		c.MaxBodyBytes = fuzzMaxBody
		c.AuditRetention = 20
	})
}

// checkAnswer checks what every answer must be: one of codes, JSON, and
// for errors a JSON {"error": ...}.
func checkAnswer(t *testing.T, body []byte, rec *httptest.ResponseRecorder, codes ...int) {
	t.Helper()
	if !slices.Contains(codes, rec.Code) {
		t.Fatalf("body %q: got %d %s, want one of %v", body, rec.Code, rec.Body, codes)
	}
	if rec.Header().Get("Content-Type") != "application/json" || !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("body %q: the answer %q is not JSON", body, rec.Body)
	}
	if rec.Code >= 400 {
		var eb adminapi.ErrorBody
		if err := jsonDecode(rec.Body.Bytes(), &eb); err != nil || eb.Error == "" {
			t.Fatalf("body %q: error answer %q is not {\"error\": ...}: %v", body, rec.Body, err)
		}
		if rec.Code == http.StatusUnprocessableEntity && len(eb.Fields) == 0 {
			t.Fatalf("body %q: 422 without fields: %s", body, rec.Body)
		}
	}
}

// FuzzCreate posts arbitrary bodies to POST /rate-limits. The server must
// answer one of the documented statuses, never a 5xx; it may create a rule
// only from a body rule.ParseRule accepts, and then stores exactly what it
// answers. The seed corpus is in testdata/fuzz/FuzzCreate.
func FuzzCreate(f *testing.F) {
	e := fuzzEnv(f)
	f.Add([]byte(seedCreate))
	f.Add([]byte(loginRule))
	f.Add([]byte(`{"rule_id": "r", "limit": 1, "window_seconds": 1, "key_type": "ip", "conditions": {"a": "x", "a": "y"}, "overrides": [{"key": "k", "action": "deny", "action": "allow"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		e := e.with(t)
		req := httptest.NewRequest("POST", "/rate-limits", bytes.NewReader(body))
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		checkAnswer(t, body, rec, 201, 400, 409, 413, 422)
		want, parseErr := rule.ParseRule(body)
		switch rec.Code {
		case 201:
			if parseErr != nil {
				t.Fatalf("body %q: created, but rule.ParseRule says %v", body, parseErr)
			}
			got, err := rule.ParseRule(rec.Body.Bytes())
			if err != nil {
				t.Fatalf("body %q: the answer %s does not parse: %v", body, rec.Body, err)
			}
			if got.ID != want.ID || got.Limit != want.Limit || (want.Domain != "" && got.Domain != want.Domain) {
				t.Fatalf("body %q: created %+v", body, got)
			}
			key := e.layout.Rule(got.Domain, got.ID)
			stored, _ := e.get(key)
			if stored != string(bytes.TrimSpace(rec.Body.Bytes())) {
				t.Fatalf("body %q: answered %s, stored %s", body, rec.Body, stored)
			}
			if _, err := e.cli.Delete(context.Background(), key); err != nil {
				t.Fatal(err)
			}
		case 409:
			if parseErr != nil {
				t.Fatalf("body %q: 409 for an invalid rule (%v)", body, parseErr)
			}
		case 400:
			if !errors.Is(parseErr, rule.ErrSyntax) && !errors.Is(parseErr, rule.ErrTooLarge) {
				t.Fatalf("body %q: 400, but rule.ParseRule says %v", body, parseErr)
			}
		case 422:
			if !errors.Is(parseErr, rule.ErrInvalid) {
				t.Fatalf("body %q: 422, but rule.ParseRule says %v", body, parseErr)
			}
		case 413:
			if len(body) <= fuzzMaxBody {
				t.Fatalf("body %q: 413 for %d bytes", body, len(body))
			}
		}
	})
}

// FuzzUpdate sends arbitrary bodies to PUT /rate-limits/{rule_id} of a
// stored rule. The server must answer one of the documented statuses,
// never a 5xx; whatever it stores must be a valid rule with the same id,
// domain and created_at, and exactly what it answers; and it may change the
// rule only for a body that is a JSON object. The seed corpus is in
// testdata/fuzz/FuzzUpdate.
func FuzzUpdate(f *testing.F) {
	e := fuzzEnv(f)
	rec := e.do("POST", "/rate-limits", seedCreate)
	if rec.Code != 201 {
		f.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	key := e.layout.Rule("default", "api-global-default")
	base, _ := e.get(key)
	f.Add([]byte(seedUpdate))
	f.Add([]byte(`{"burst": null, "algorithm": "TokenBucket", "burst": 5}`))
	f.Add([]byte(`{"conditions": {"plan": "a", "plan": "b"}, "methods": ["GET"]}`))
	f.Add([]byte(`{"overrides": [{"key": "k", "action": "deny"}, {"key": "j", "key": "i", "action": "allow"}], "key_type": "ip"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		e := e.with(t)
		e.put(key, base)
		_, rev := e.get(key)
		req := httptest.NewRequest("PUT", "/rate-limits/api-global-default", bytes.NewReader(body))
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		checkAnswer(t, body, rec, 200, 400, 413, 422)
		stored, newRev := e.get(key)
		if rec.Code != 200 {
			if newRev != rev {
				t.Fatalf("body %q: refused (%d), but the rule changed to %s", body, rec.Code, stored)
			}
			return
		}
		if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || trimmed[0] != '{' {
			t.Fatalf("body %q: not an object, but the update was accepted", body)
		}
		if tree, err := document.ParseJSON(body, document.Limits{}); err != nil || len(tree.Duplicates("")) > 0 {
			t.Fatalf("body %q: malformed or repeating a key (%v), but the update was accepted", body, err)
		}
		if stored != string(bytes.TrimSpace(rec.Body.Bytes())) {
			t.Fatalf("body %q: answered %s, stored %s", body, rec.Body, stored)
		}
		got, err := rule.ParseRule([]byte(stored))
		if err != nil {
			t.Fatalf("body %q: stored an invalid rule %s: %v", body, stored, err)
		}
		if got.ID != "api-global-default" || got.Domain != "default" || !got.CreatedAt.Equal(t0) {
			t.Fatalf("body %q: the bookkeeping changed: %+v", body, got)
		}
	})
}
