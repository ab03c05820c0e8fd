package limiterd_test

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/testkit/redistest"
)

// TestRedisClusterAddresses starts a limiter on a Redis Cluster given each
// way --redis can name one — comma-separated nodes, a URL naming further
// nodes with addr parameters (the form a cluster with TLS or a password
// needs), or one node, whose cluster the limiter finds — and checks that keys spread over every slot range are
// all decided on the store: a client that took the URL for one node would
// get MOVED for two thirds of them and decide those by the failure mode.
func TestRedisClusterAddresses(t *testing.T) {
	cluster := redistest.StartCluster(t)
	addrs := cluster.Addrs()
	rules := writeRules(t)
	const users = 30
	for _, tc := range []struct {
		name  string
		redis string
	}{
		{"comma-separated nodes", strings.Join(addrs[:3], ",")},
		{"URL with addr parameters", "redis://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2]},
		{"URL of one node with one addr", "redis://" + addrs[1] + "?addr=" + addrs[1]},
		// One node named, the others found from it (redisClient).
		{"one node's address", addrs[2]},
		{"URL of one node", "redis://" + addrs[0]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A store timeout far above the default 20ms: this test is
			// about where keys are sent, and a loaded machine's slow
			// reply (one in 30 here under -race) would be decided by the
			// failure mode too.
			base := startLimiter(t, limiterd.Config{DC: "a", Redis: tc.redis, RulesFile: rules, StoreTimeout: time.Second})
			for i := range users {
				body := fmt.Sprintf(`{"domain":"api","attributes":{"user_id":"%s-%d"}}`, tc.name, i)
				resp, err := http.Post(base+"/v1/check", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("check of user %d: got status %d, want 200", i, resp.StatusCode)
				}
			}
			bySource := decisionsBySource(t, base)
			if got := bySource["store"]; got != users {
				t.Errorf("decisions on the store: got %d, want %d (all: %v)", got, users, bySource)
			}
		})
	}
}

// startLimiter runs limiterd with cfg on loopback ports until t ends and
// returns its HTTP base URL.
func startLimiter(t *testing.T, cfg limiterd.Config) string {
	t.Helper()
	base, _ := runLimiter(t, cfg)
	return base
}

// decisionsBySource sums weir_decisions_total by its source label.
func decisionsBySource(t *testing.T, base string) map[string]int {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "weir_decisions_total{") {
			continue
		}
		_, rest, _ := strings.Cut(line, `source="`)
		source, _, _ := strings.Cut(rest, `"`)
		n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[source] += int(n)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
