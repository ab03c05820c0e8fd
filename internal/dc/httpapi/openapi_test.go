package httpapi_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weirhq/weir/internal/dc/envoyrls"
	"github.com/weirhq/weir/internal/dc/httpapi"
	"github.com/weirhq/weir/internal/testkit/limitertest"
	"github.com/weirhq/weir/internal/testkit/openapitest"
)

const openapiRules = `
domain: shop
rules:
  - rule_id: per-user
    key_type: user_id
    limit: 1
    window_seconds: 60
    algorithm: FixedWindow
    overrides:
      - key: banned
        action: deny
      - key: vip
        action: allow
  - rule_id: seed
    key_type: client_id
    limit: 1
    window_seconds: 60
`

// openapiServer runs the API over a limiter with rules ("" for none).
func openapiServer(t *testing.T, rules string) (*httptest.Server, *httpapi.Server) {
	t.Helper()
	reg := prometheus.NewRegistry()
	lim := limitertest.New(t, rules, nil)
	api, err := httpapi.New(httpapi.Config{
		Limiter: lim, Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Envoy:  envoyrls.JSONHandler(envoyrls.NewService(lim, envoyrls.Config{})),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return srv, api
}

// TestOpenAPI checks docs/openapi/check.yaml against the running server:
// the document is valid; each call below is a request the document
// allows (or one it does not, marked bad) and gets a response of a
// documented status with a documented body and headers; every documented
// status of every operation is seen; every route the server serves is
// documented, and every documented operation is served.
func TestOpenAPI(t *testing.T) {
	doc := openapitest.Load(t, "docs/openapi/check.yaml")
	srv, api := openapiServer(t, openapiRules)
	bare, _ := openapiServer(t, "")

	type call struct {
		name        string
		srv         *httptest.Server
		method, url string
		contentType string
		body        string
		bad         bool // a request the document does not allow
		wantCode    int
	}
	huge := `{"attributes":{"user_id":"` + strings.Repeat("x", httpapi.DefaultMaxBody) + `"}}`
	calls := []call{
		{"check allowed", srv, "POST", "/v1/check", "application/json", `{"attributes":{"user_id":"u1"}}`, false, 200},
		{"check rejected", srv, "POST", "/v1/check", "application/json", `{"attributes":{"user_id":"u1"},"hits":1}`, false, 429},
		{"check denied", srv, "POST", "/v1/check", "application/json", `{"attributes":{"user_id":"banned"}}`, false, 403},
		{"check, allow override", srv, "POST", "/v1/check", "application/json", `{"attributes":{"user_id":"vip"}}`, false, 200},
		{"status, deny override", srv, "GET", "/v1/rate-limits/per-user/banned", "", "", false, 200},
		{"check, no rule", srv, "POST", "/v1/check", "application/json", `{"descriptors":[{"key":"other","value":"x"}]}`, false, 200},
		{"check, unknown domain", srv, "POST", "/v1/check", "application/json", `{"domain":"nope","attributes":{"user_id":"u1"}}`, false, 400},
		// The document says a key may not repeat; a schema cannot.
		{"check, repeated key", srv, "POST", "/v1/check", "application/json", `{"attributes":{"user_id":"u9","user_id":"u1"}}`, false, 400},
		{"seed, repeated key", srv, "POST", "/shouldAllowRequest", "application/json", `{"clientId":"c9","clientId":"c1"}`, false, 400},
		{"check, unknown field", srv, "POST", "/v1/check", "application/json", `{"user":"u1"}`, true, 400},
		{"check, body too large", srv, "POST", "/v1/check", "application/json", huge, true, 413},
		{"check, text body", srv, "POST", "/v1/check", "text/plain", `{}`, true, 415},
		{"check, no rules", bare, "POST", "/v1/check", "application/json", `{"attributes":{"user_id":"u1"}}`, false, 503},
		{"seed allowed", srv, "POST", "/shouldAllowRequest", "application/json", `{"clientId":"c1","timestamp":"2026-11-25T10:00:00Z"}`, false, 200},
		{"seed rejected", srv, "POST", "/shouldAllowRequest", "application/json", `{"clientId":"c1"}`, false, 200},
		{"seed, no client", srv, "POST", "/shouldAllowRequest", "application/json", `{"timestamp":"2026-11-25T10:00:00Z"}`, true, 400},
		{"seed, body too large", srv, "POST", "/shouldAllowRequest", "application/json", huge, true, 413},
		{"seed, text body", srv, "POST", "/shouldAllowRequest", "text/plain", `{}`, true, 415},
		{"seed, no rules", bare, "POST", "/shouldAllowRequest", "application/json", `{"clientId":"c1"}`, false, 503},
		{"status", srv, "GET", "/v1/rate-limits/per-user/u1", "", "", false, 200},
		{"status with domain", srv, "GET", "/v1/rate-limits/per-user/u2?domain=shop", "", "", false, 200},
		{"status, unknown rule", srv, "GET", "/v1/rate-limits/nope/u1", "", "", false, 404},
		{"status, unknown domain", srv, "GET", "/v1/rate-limits/per-user/u1?domain=nope", "", "", false, 400},
		{"status, no rules", bare, "GET", "/v1/rate-limits/per-user/u1", "", "", false, 503},
		{"healthz", srv, "GET", "/healthz", "", "", false, 200},
		{"readyz", srv, "GET", "/readyz", "", "", false, 200},
		{"readyz, no rules", bare, "GET", "/readyz", "", "", false, 503},
		{"healthcheck", srv, "GET", "/healthcheck", "", "", false, 200},
		{"healthcheck, no rules", bare, "GET", "/healthcheck", "", "", false, 500},
		{"metrics", srv, "GET", "/metrics", "", "", false, 200},
		{"envoy json", srv, "POST", "/json", "application/json", `{"domain":"shop","descriptors":[{"entries":[{"key":"user_id","value":"j1"}]}]}`, false, 200},
		{"envoy json, over limit", srv, "POST", "/json", "application/json", `{"domain":"shop","descriptors":[{"entries":[{"key":"user_id","value":"j1"}]}]}`, false, 429},
		{"envoy json, unknown domain", srv, "POST", "/json", "application/json", `{"domain":"nope","hitsAddend":2,"descriptors":[{"entries":[{"key":"user_id","value":"j1"}]}]}`, false, 200},
		{"envoy json, malformed", srv, "POST", "/json", "application/json", `}`, true, 400},
		{"envoy json, no domain", srv, "POST", "/json", "application/json", `{"descriptors":[{"entries":[{"key":"user_id","value":"j1"}]}]}`, true, 400},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			hdr := http.Header{}
			if c.contentType != "" {
				hdr.Set("Content-Type", c.contentType)
			}
			doc.Send(t, c.srv.URL, openapitest.Call{Method: c.method, Target: c.url, Header: hdr, Body: c.body, Bad: c.bad, WantCode: c.wantCode})
		})
	}
	doc.CheckSeen(t)
	doc.CheckRoutes(t, api.Routes())
}
