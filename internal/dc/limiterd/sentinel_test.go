package limiterd_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/wait"
)

// TestRedisSentinel runs a limiter on the primary that a Redis Sentinel
// watches (--redis redis://SENTINEL?master_name=NAME, as
// envoyproxy/ratelimit's REDIS_TYPE=sentinel): its decisions are made on
// the store; when the primary dies, the Sentinel promotes the replica and
// the limiter's decisions go back to the store, on the new primary.
func TestRedisSentinel(t *testing.T) {
	s := redistest.StartSentinel(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("domain: api\nrules:\n  - rule_id: per-user\n    key_type: user_id\n    limit: 1000000\n    window_seconds: 600\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A store timeout far above the default: this test is about where
	// decisions go, and a loaded machine's slow reply would be decided by
	// the failure mode too.
	base := startLimiter(t, limiterd.Config{DC: "a", Redis: "redis://" + s.Sentinel.Addr + "?master_name=" + s.MasterName, RulesFile: rules, StoreTimeout: time.Second})
	checks := func(user string, n int) {
		t.Helper()
		for range n {
			resp, err := http.Post(base+"/v1/check", "application/json", strings.NewReader(fmt.Sprintf(`{"domain":"api","attributes":{"user_id":%q}}`, user)))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("check of %s: status %d %s, want 200", user, resp.StatusCode, b)
			}
		}
	}
	checks("before", 10)
	if got := decisionsBySource(t, base)["store"]; got != 10 {
		t.Fatalf("decisions on the store through the Sentinel: got %d, want 10 (all: %v)", got, decisionsBySource(t, base))
	}
	// The primary holds the key the limiter wrote.
	if keys, err := s.Primary.Client(t).Keys(t.Context(), "*before*").Result(); err != nil || len(keys) != 1 {
		t.Fatalf("keys of user before on the primary: %v %v, want one", keys, err)
	}

	killed := time.Now()
	s.Primary.Stop()
	wait.For(t, 30*time.Second, "decisions on the store again, on the promoted replica", func() bool {
		before := decisionsBySource(t, base)["store"]
		checks("after", 1)
		return decisionsBySource(t, base)["store"] == before+1
	})
	t.Logf("decisions on the store again %v after the primary was killed", time.Since(killed).Round(100*time.Millisecond))
	if keys, err := s.Replica.Client(t).Keys(t.Context(), "*after*").Result(); err != nil || len(keys) != 1 {
		t.Errorf("keys of user after on the promoted replica: %v %v, want one", keys, err)
	}
}
