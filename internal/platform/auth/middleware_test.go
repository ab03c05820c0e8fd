package auth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/platform/auth"
)

func TestMiddleware(t *testing.T) {
	toks, err := auth.Parse([]byte(tokA + " rw writer\n" + tokB + " ro reader\n"))
	if err != nil {
		t.Fatal(err)
	}
	var reached auth.Principal
	h := auth.Middleware(toks, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := auth.FromContext(r.Context())
		if !ok {
			t.Errorf("no principal in the context")
		}
		reached = p
		w.WriteHeader(http.StatusOK)
	}))
	const (
		challenge = `Bearer realm="weir"`
		invalid   = `Bearer realm="weir", error="invalid_token"`
		scope     = `Bearer realm="weir", error="insufficient_scope"`
	)
	tests := []struct {
		name      string
		method    string
		auth      []string
		code      int
		challenge string
		who       string
	}{
		{"no header", "GET", nil, 401, challenge, ""},
		{"empty header", "GET", []string{""}, 401, challenge, ""},
		{"basic scheme", "GET", []string{"Basic " + tokA}, 401, challenge, ""},
		{"bearer without token", "GET", []string{"Bearer "}, 401, challenge, ""},
		{"token without scheme", "GET", []string{tokA}, 401, challenge, ""},
		{"two headers", "GET", []string{"Bearer " + tokA, "Bearer " + tokA}, 401, challenge, ""},
		{"unknown token", "GET", []string{"Bearer " + tokC}, 401, invalid, ""},
		{"unknown token on a write", "DELETE", []string{"Bearer " + tokC}, 401, invalid, ""},
		{"prefix of a token", "GET", []string{"Bearer " + tokA[:20]}, 401, invalid, ""},
		{"writer GET", "GET", []string{"Bearer " + tokA}, 200, "", "writer"},
		{"writer POST", "POST", []string{"Bearer " + tokA}, 200, "", "writer"},
		{"writer PUT", "PUT", []string{"Bearer " + tokA}, 200, "", "writer"},
		{"writer DELETE", "DELETE", []string{"Bearer " + tokA}, 200, "", "writer"},
		{"scheme in lower case", "GET", []string{"bearer " + tokA}, 200, "", "writer"},
		{"extra spaces", "GET", []string{"  Bearer   " + tokA + "  "}, 200, "", "writer"},
		{"reader GET", "GET", []string{"Bearer " + tokB}, 200, "", "reader"},
		{"reader HEAD", "HEAD", []string{"Bearer " + tokB}, 200, "", "reader"},
		{"reader POST", "POST", []string{"Bearer " + tokB}, 403, scope, ""},
		{"reader PUT", "PUT", []string{"Bearer " + tokB}, 403, scope, ""},
		{"reader DELETE", "DELETE", []string{"Bearer " + tokB}, 403, scope, ""},
		{"reader PATCH", "PATCH", []string{"Bearer " + tokB}, 403, scope, ""},
		{"reader OPTIONS", "OPTIONS", []string{"Bearer " + tokB}, 403, scope, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reached = auth.Principal{}
			req := httptest.NewRequest(tt.method, "/rate-limits", nil)
			for _, v := range tt.auth {
				req.Header.Add("Authorization", v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.code {
				t.Fatalf("got %d, want %d", rec.Code, tt.code)
			}
			if got := rec.Header().Get("WWW-Authenticate"); got != tt.challenge {
				t.Errorf("WWW-Authenticate: got %q, want %q", got, tt.challenge)
			}
			if reached.Name != tt.who {
				t.Errorf("handler reached by %q, want %q", reached.Name, tt.who)
			}
			if tt.code == 200 {
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type: got %q, want application/json", ct)
			}
			var body map[string]string
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["error"] == "" || len(body) != 1 {
				t.Errorf("body %q: want {\"error\": ...} (%v)", rec.Body, err)
			}
			if strings.Contains(rec.Body.String(), "secret") {
				t.Errorf("body %q holds a token", rec.Body)
			}
		})
	}
}

func TestFromContextEmpty(t *testing.T) {
	req := httptest.NewRequest("GET", "/", nil)
	if p, ok := auth.FromContext(req.Context()); ok {
		t.Errorf("got %+v, want no principal", p)
	}
}
