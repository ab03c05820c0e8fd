package coordinator

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weirhq/weir/internal/testkit/openapitest"
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
	usage := make(map[string]*weirv1.RuleUsage, len(simDCs))
	for _, dc := range simDCs {
		usage[dc] = &weirv1.RuleUsage{Domain: "api", RuleId: "r", Offered: 50, Admitted: 49, Rejected: 1,
			Keys: []*weirv1.KeyUsage{{Key: key, Offered: 50, Admitted: 49, Rejected: 1, Limit: 1000}}}
	}
	h.publish(ctx, usage)
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
	doc := openapitest.Load(t, "docs/openapi/coordinator.yaml")
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
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			hdr := http.Header{}
			if c.token != "" {
				hdr.Set("Authorization", "Bearer "+c.token)
			}
			resp := doc.Send(t, c.srv.URL, openapitest.Call{Method: "GET", Target: c.url, Header: hdr, WantCode: c.wantCode})
			if !bytes.Contains(resp.Body, []byte(c.wantBody)) {
				t.Errorf("got body %s, want one holding %s", resp.Body, c.wantBody)
			}
		})
	}
	doc.CheckSeen(t)
	doc.CheckRoutes(t, append(leader.c.Routes(), metricsRoute))
}
