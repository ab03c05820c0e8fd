package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weirhq/weir/internal/dc/httpapi"
	"github.com/weirhq/weir/internal/testkit/limitertest"
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
	api, err := httpapi.New(httpapi.Config{
		Limiter: limitertest.New(t, rules, nil), Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
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
	ctx := context.Background()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("../../../docs/openapi/check.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("docs/openapi/check.yaml is not valid OpenAPI 3: %v", err)
	}
	doc.Servers = nil // an example address: the test servers listen elsewhere
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
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
		{"metrics", srv, "GET", "/metrics", "", "", false, 200},
	}
	seen := map[string]bool{} // "METHOD path status"
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, c.srv.URL+c.url, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if c.contentType != "" {
				req.Header.Set("Content-Type", c.contentType)
			}
			route, params, err := router.FindRoute(req)
			if err != nil {
				t.Fatalf("%s %s is not documented: %v", c.method, c.url, err)
			}
			in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route}
			if err := openapi3filter.ValidateRequest(ctx, in); (err != nil) != c.bad {
				t.Errorf("request validation: got %v, want an error: %v", err, c.bad)
			}
			req.Body = io.NopCloser(strings.NewReader(c.body)) // validation read it
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != c.wantCode {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, c.wantCode)
			}
			err = openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
				RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
				Body: io.NopCloser(bytes.NewReader(body)), Options: &openapi3filter.Options{IncludeResponseStatus: true},
			})
			if err != nil {
				t.Errorf("response %d %s does not match the document: %v", resp.StatusCode, body, err)
			}
			seen[route.Method+" "+route.Path+" "+strconv.Itoa(resp.StatusCode)] = true
		})
	}

	var documented []string // "METHOD path"
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			documented = append(documented, method+" "+path)
			for code := range op.Responses.Map() {
				if k := method + " " + path + " " + code; !seen[k] {
					t.Errorf("documented response %s: never seen", k)
				}
			}
		}
	}
	var served []string
	for _, p := range api.Routes() {
		// ServeMux's {name...} takes the rest of the path; OpenAPI's
		// {name} is the same parameter.
		served = append(served, strings.ReplaceAll(p, "...}", "}"))
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(served, documented) {
		t.Errorf("routes served:\n%s\nroutes documented:\n%s", strings.Join(served, "\n"), strings.Join(documented, "\n"))
	}
}
