// Package openapitest holds an OpenAPI 3 document in docs/openapi to the
// server it describes. A test loads the document, makes its calls through
// the Doc (each request checked against the document before it is sent,
// each response after it comes back), then checks that every documented
// response was seen and that the server's routes are the documented
// operations. Validation is github.com/getkin/kin-openapi's openapi3filter
// with its legacy router.
package openapitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Doc is a loaded, valid OpenAPI 3 document and the responses seen so far
// by calls made through it. A Doc is safe for concurrent use by parallel
// subtests; it has no useful zero value: make one with Load.
type Doc struct {
	path   string
	doc    *openapi3.T
	router routers.Router

	mu   sync.Mutex
	seen map[string]bool // "METHOD /path status", path as documented
}

// Load reads the document at path, relative to the repository root (the
// nearest directory above the test's working directory that holds
// go.mod), and fails t unless it is valid OpenAPI 3. The document's
// servers are ignored: requests match its paths on any host.
func Load(t testing.TB, path string) *Doc {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("find the repository root: %v", err)
	}
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join(root, path))
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("%s is not valid OpenAPI 3: %v", path, err)
	}
	doc.Servers = nil // example addresses: the test servers listen elsewhere
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("route %s: %v", path, err)
	}
	return &Doc{path: path, doc: doc, router: router, seen: map[string]bool{}}
}

// repoRoot returns the nearest directory above the working directory that
// holds go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Call is one request and the status it must get.
type Call struct {
	// Method and Target are the request's method and its path with any
	// query ("/v1/rate-limits/r/k?domain=shop").
	Method, Target string
	// Header is sent as it is; nil for none. Content-Type, when there is a
	// body, is the caller's to set.
	Header http.Header
	// Body is the request's body; "" for none.
	Body string
	// Bad marks a request the document does not allow: its validation
	// must fail, and the call still goes to the server, which must answer
	// WantCode (a refusal, usually). Otherwise its validation must pass.
	Bad bool
	// WantCode is the status the server must answer.
	WantCode int
}

// Response is a server's answer to a Call: its status, its headers and
// its whole body.
type Response struct {
	Code   int
	Header http.Header
	Body   []byte
}

// Serve sends c to h in process (h.ServeHTTP with a recorder) and checks
// both sides against the document. It fails t (Fatalf) when the request
// matches no documented operation or the status is not c.WantCode; it
// reports (Errorf) a request whose validation does not fail exactly when
// c.Bad, and a response whose status, headers or body the document does
// not allow for the operation. A response of c.WantCode counts as seen for
// CheckSeen, even if it does not match the document. The document's
// bearer security schemes hold for any "Bearer " Authorization header
// (which token is the server's concern); a scheme of any other kind fails
// validation.
func (d *Doc) Serve(t testing.TB, h http.Handler, c Call) Response {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), c.Method, c.Target, strings.NewReader(c.Body))
	return d.call(t, req, c, func(req *http.Request) (Response, error) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return Response{Code: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}, nil
	})
}

// Send is Serve over HTTP: it sends c with http.DefaultClient to the
// server at baseURL ("http://127.0.0.1:8080", no trailing slash), and
// also fails t when the call cannot be made.
func (d *Doc) Send(t testing.TB, baseURL string, c Call) Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), c.Method, baseURL+c.Target, strings.NewReader(c.Body))
	if err != nil {
		t.Fatalf("%s %s: %v", c.Method, c.Target, err)
	}
	return d.call(t, req, c, func(req *http.Request) (Response, error) {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return Response{}, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return Response{Code: resp.StatusCode, Header: resp.Header, Body: body}, err
	})
}

// call validates req (built from c), answers it with do, and validates
// and records the answer.
func (d *Doc) call(t testing.TB, req *http.Request, c Call, do func(*http.Request) (Response, error)) Response {
	t.Helper()
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	route, params, err := d.router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s is not documented in %s: %v", c.Method, c.Target, d.path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: bearerAuth}}
	if err := openapi3filter.ValidateRequest(t.Context(), in); (err != nil) != c.Bad {
		t.Errorf("request validation: got %v, want an error: %v", err, c.Bad)
	}
	req.Body = io.NopCloser(strings.NewReader(c.Body)) // validation read it
	resp, err := do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.Method, c.Target, err)
	}
	if resp.Code != c.WantCode {
		t.Fatalf("got %d %s, want %d", resp.Code, resp.Body, c.WantCode)
	}
	err = openapi3filter.ValidateResponse(t.Context(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.Code, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(resp.Body)), Options: &openapi3filter.Options{IncludeResponseStatus: true},
	})
	if err != nil {
		t.Errorf("response %d %s does not match %s: %v", resp.Code, resp.Body, d.path, err)
	}
	d.mu.Lock()
	d.seen[route.Method+" "+route.Path+" "+strconv.Itoa(resp.Code)] = true
	d.mu.Unlock()
	return resp
}

// bearerAuth is the check of a document's security scheme: an http bearer
// scheme holds when the request has a Bearer token.
func bearerAuth(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if s := in.SecurityScheme; s == nil || s.Type != "http" || !strings.EqualFold(s.Scheme, "bearer") {
		return fmt.Errorf("security scheme %s: openapitest checks only http bearer schemes", in.SecuritySchemeName)
	}
	if !strings.HasPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ") {
		return errors.New("no bearer token")
	}
	return nil
}

// CheckSeen reports (Errorf) each response the document lists for an
// operation that no call through d has seen. Responses are matched by
// their key as written: a range ("4XX") or "default" is never seen, so a
// document checked this way lists each status it allows. Call it after
// the calls.
func (d *Doc) CheckSeen(t testing.TB) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, op := range d.Operations() {
		method, path, _ := strings.Cut(op, " ")
		codes := d.doc.Paths.Value(path).GetOperation(method).Responses.Map()
		for _, code := range slices.Sorted(maps.Keys(codes)) {
			if k := op + " " + code; !d.seen[k] {
				t.Errorf("documented response %s: never seen", k)
			}
		}
	}
}

// CheckRoutes reports (Errorf) each of served that the document does not
// describe and each documented operation not among served. served are
// the server's http.ServeMux patterns, each "METHOD /path"; a wildcard
// "{name...}" is the document's "{name}", and patterns are otherwise
// compared as written.
func (d *Doc) CheckRoutes(t testing.TB, served []string) {
	t.Helper()
	documented := d.Operations()
	var routes []string
	for _, p := range served {
		routes = append(routes, strings.ReplaceAll(p, "...}", "}"))
	}
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is served but not documented in %s", r, d.path)
		}
	}
	for _, op := range documented {
		if !slices.Contains(routes, op) {
			t.Errorf("operation %s is documented in %s but not served", op, d.path)
		}
	}
}

// Operations returns the document's operations, each "METHOD /path" as
// the document writes it ("GET /rate-limits/{rule_id}"), sorted.
func (d *Doc) Operations() []string {
	var ops []string
	for path, item := range d.doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	slices.Sort(ops)
	return ops
}
