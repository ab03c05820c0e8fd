package coordinator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// metricsRoute is the route coordinatord's adminMux mounts beside Handler
// on the admin port, serving the registry Collector joins;
// docs/openapi/coordinator.yaml documents it with Handler's.
const metricsRoute = "GET /metrics"

// openapiServer serves c's Handler and, on metricsRoute, a Prometheus
// registry holding c's Collector, as the admin port does.
func openapiServer(t *testing.T, c *Coordinator) *httptest.Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Collector())
	mux := http.NewServeMux()
	mux.Handle("/", c.Handler())
	mux.Handle(metricsRoute, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// reportPressure publishes one interval's report from every DC in which
// key, under the harness's rule, is rejected: the planner gives such a key
// a share of its own.
func (h *harness) reportPressure(ctx context.Context, key string) {
	start := time.Now().UnixMilli()/200*200 - 200
	var msgs []kafka.Message
	for _, dc := range simDCs {
		h.seq++
		r := &weirv1.UsageReport{Dc: dc, Instance: dc + "-1", Sequence: h.seq, IntervalStartMs: start, IntervalMs: 200,
			Rules: []*weirv1.RuleUsage{{Domain: "api", RuleId: "r", Offered: 50, Admitted: 49, Rejected: 1,
				Keys: []*weirv1.KeyUsage{{Key: key, Offered: 50, Admitted: 49, Rejected: 1, Limit: 1000}}}}}
		b, err := proto.Marshal(r)
		if err != nil {
			h.t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(r.Instance), Value: b})
	}
	if err := h.w.WriteMessages(ctx, msgs...); err != nil && ctx.Err() == nil {
		h.t.Errorf("publish: %v", err)
	}
}

// bearerAuth is the check of the document's bearer scheme: a request that
// uses it has a Bearer token (which one is auth.Middleware's concern, in
// coordinatord).
func bearerAuth(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if !strings.HasPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ") {
		return errors.New("no bearer token")
	}
	return nil
}

// TestOpenAPI checks docs/openapi/coordinator.yaml against a leading and a
// standby coordinator: the document is valid; each call below is a request
// the document allows and gets a response of a documented status with a
// documented body; every documented status of every operation is seen;
// every route Handler registers (and metricsRoute) is documented, and
// every documented operation is served. The leader plans the harness's
// global rule under an operator's policy, hears its DCs' instances and
// gives a key under pressure a share of its own, so that the views answer
// with real content.
func TestOpenAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	doc, err := openapi3.NewLoader().LoadFromFile("../../../docs/openapi/coordinator.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("docs/openapi/coordinator.yaml is not valid OpenAPI 3: %v", err)
	}
	doc.Servers = nil // an example address: the test servers listen elsewhere
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}

	h := newHarness(t)
	leader := h.start("c1")
	waitFor(t, 5*time.Second, "c1 leads", leader.c.Leader)
	standby := h.start("c2")
	// An operator's policy, so that the views show one of every kind.
	if _, err := h.cli.Put(ctx, h.layout.Policy("api", "r"), `{"dcs":{"a":{"pin":0.6},"b":{"floor":0.1,"ceiling":0.9},"c":{"drained":true}}}`); err != nil {
		t.Fatal(err)
	}
	fctx, stopFeed := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopFeed()
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			h.reportPressure(fctx, "user-1")
			h.ackAll(fctx)
			select {
			case <-fctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	waitFor(t, 10*time.Second, "a key with a share of its own, the policy applied, and every DC's instance heard", func() bool {
		keys, _ := leader.c.KeyShares("api", "r")
		rules, _ := leader.c.Shares()
		return len(keys) > 0 && len(rules) == 1 && rules[0].DCs[2].Policy.Drained && len(leader.c.Status().Instances) == len(simDCs)
	})
	if standby.c.Leader() {
		t.Fatal("c2 leads beside c1")
	}
	lead, stby := openapiServer(t, leader.c), openapiServer(t, standby.c)

	type call struct {
		name     string
		srv      *httptest.Server
		url      string
		token    string // "" for none
		wantCode int
		wantBody string // a part of the body, if any
	}
	calls := []call{
		{"healthz", lead, "/healthz", "", 200, "ok"},
		{"metrics", lead, "/metrics", "", 200, `weir_coordinator_share{dc="a",domain="api",rule="r"}`},
		{"status", lead, "/v1/status", "", 200, `"leader": true`},
		{"status, bearer token", lead, "/v1/status", "t0ken", 200, `"instances"`},
		{"status, standby", stby, "/v1/status", "", 200, `"leader": false`},
		{"shares", lead, "/v1/shares", "", 200, `"pin": 0.6`},
		{"shares, standby", stby, "/v1/shares", "", 503, "not the leader"},
		{"key shares", lead, "/v1/shares/api/r", "", 200, `"key": "user-1"`},
		{"key shares, unknown rule", lead, "/v1/shares/api/nope", "", 404, "no such global rule"},
		{"key shares, standby", stby, "/v1/shares/api/r", "", 503, "not the leader"},
	}
	opts := &openapi3filter.Options{AuthenticationFunc: bearerAuth}
	seen := map[string]bool{} // "METHOD path status"
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, "GET", c.srv.URL+c.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			route, params, err := router.FindRoute(req)
			if err != nil {
				t.Fatalf("GET %s is not documented: %v", c.url, err)
			}
			in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
			if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
				t.Errorf("request validation: got %v, want none", err)
			}
			resp, err := c.srv.Client().Do(req)
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
			if !bytes.Contains(body, []byte(c.wantBody)) {
				t.Errorf("got body %s, want one holding %s", body, c.wantBody)
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
	served := append(leader.c.Routes(), metricsRoute)
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(served, documented) {
		t.Errorf("routes served:\n%s\nroutes documented:\n%s", strings.Join(served, "\n"), strings.Join(documented, "\n"))
	}
}
