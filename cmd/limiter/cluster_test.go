package main_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/testkit/redistest"
)

// TestRedisCluster points the limiter at a local Redis Cluster (--redis
// with the nodes' addresses, comma-separated) and checks the HTTP
// contract for every algorithm, on keys spread over the three primaries:
// each key admits its limit from the store and then answers 429 with a
// Retry-After; /readyz answers 200; and the store's breaker state is
// exported per primary.
func TestRedisCluster(t *testing.T) {
	skipShort(t)
	cl := redistest.StartCluster(t)
	rulesPath := t.TempDir() + "/rules.yaml"
	writeFile(t, rulesPath, rulesYAML)
	p := startLimiter(t, []string{"--dc", "cluster-dc", "--redis", strings.Join(cl.Addrs(), ","), "--rules", rulesPath,
		"--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--store-timeout", "500ms"})
	if r := p.get(t, "/readyz"); r.code != http.StatusOK {
		t.Fatalf("readyz: got %d %s, want 200", r.code, r.body)
	}
	for _, alg := range algorithms {
		t.Run(alg, func(t *testing.T) {
			// Twelve users: their keys' slots fall on every primary.
			for u := range 12 {
				body := checkBody(alg, "c-"+strconv.Itoa(u))
				for i := range 4 {
					r, resp := p.check(t, body)
					wantCode, wantRemaining := http.StatusOK, int64(2-i)
					if i == 3 {
						wantCode, wantRemaining = http.StatusTooManyRequests, 0
					}
					if r.code != wantCode || len(resp.Results) != 1 || resp.Results[0].Source != "store" || v(resp.Remaining) != wantRemaining {
						t.Fatalf("user %d, request %d: got %d %s, want %d from the store, remaining %d", u, i, r.code, r.body, wantCode, wantRemaining)
					}
					if ra := r.header.Get("Retry-After"); (i == 3) != (ra != "") {
						t.Errorf("user %d, request %d: got Retry-After %q", u, i, ra)
					}
				}
			}
		})
	}
	nodes := regexp.MustCompile(`(?m)^weir_store_breaker_state\{node="([^"]+)"\} 0$`).FindAllStringSubmatch(p.metrics(t), -1)
	if len(nodes) != 3 {
		t.Errorf("weir_store_breaker_state: got %d closed nodes %v, want the 3 primaries", len(nodes), nodes)
	}
}
