package limiter_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/pkg/limiter"
)

const failoverYAML = `
domain: failover
rules:
  - {rule_id: probe, key_type: k, limit: 1000000, window_seconds: 3600, failure_mode: open, conditions: {mode: probe}}
  - {rule_id: local, key_type: k, limit: 4, window_seconds: 3600, algorithm: FixedWindow, failure_mode: local, conditions: {mode: local}}
`

// twoInstances says the DC runs two limiters: failure_mode local enforces
// half the limit here.
type twoInstances struct{}

func (twoInstances) Live() int { return 2 }

// TestLocalModeCountsAcrossStoreOutages: failure_mode local must not let a
// key through its limit twice in one window when the store changes hands.
// Going down, the local count already holds what the store admitted;
// coming back, a key decided locally is not left to the store alone while
// the admissions the store never saw still count — and what the local
// count rejects then is given back to the store. Keys not decided locally
// are the store's alone. Real redis-server, stopped and restarted; the
// window is an hour on a fake clock, so nothing here resets by time until
// the test moves past it. The limit is 4, two instances: 2 locally.
func TestLocalModeCountsAcrossStoreOutages(t *testing.T) {
	srv := redistest.Start(t)
	c := newClock()
	l := redisLimiter(t, srv, c, failoverYAML, func(cfg *limiter.Config) { cfg.Instances = twoInstances{} })
	ctx := context.Background()
	check := func(mode, key string) limiter.RuleResult {
		t.Helper()
		resp, err := l.Check(ctx, limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"mode": mode, "k": key}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Items[0].Results[0]
	}
	expect := func(step, key string, want []limiter.Source, allowed []bool) {
		t.Helper()
		for i := range want {
			if r := check("local", key); r.Source != want[i] || r.Allowed != allowed[i] {
				t.Fatalf("%s: request %d for %q: got %v allowed=%v, want %v allowed=%v", step, i+1, key, r.Source, r.Allowed, want[i], allowed[i])
			}
		}
	}
	store, local := limiter.SourceStore, limiter.SourceFailureLocal

	// Going down: one of a's admitted by Redis, then Redis dies.
	expect("healthy", "a", []limiter.Source{store}, []bool{true})
	srv.Stop()
	expect("Redis down", "a", []limiter.Source{local, local}, []bool{true, false})

	// Coming back: b spends its limit locally while Redis is down.
	expect("Redis down", "b", []limiter.Source{local, local, local}, []bool{true, true, false})
	srv.Restart(t)
	deadline := time.Now().Add(5 * time.Second)
	for check("probe", "x").Source != store {
		if time.Now().After(deadline) {
			t.Fatal("Redis back for 5 s: still not deciding from it")
		}
		c.Advance(100 * time.Millisecond) // past the breaker's cooldown, well within the window
		time.Sleep(20 * time.Millisecond)
	}
	// Redis never saw b's admissions; the local count rejects, and Redis
	// gets back what it admitted.
	expect("Redis back", "b", []limiter.Source{local, local, local}, []bool{false, false, false})
	st, err := l.Status(ctx, "failover", "local", "b")
	if err != nil {
		t.Fatal(err)
	}
	if st.Source != store || st.Remaining != 4 {
		t.Fatalf("Redis's count of b after three refused requests: source %v remaining %d, want store and 4 (refunded)", st.Source, st.Remaining)
	}
	// A key not decided locally is Redis's alone: this instance is not
	// held to its half.
	expect("Redis back", "c", []limiter.Source{store, store, store, store, store}, []bool{true, true, true, true, false})

	// Once the local admissions are out of the window, Redis alone decides.
	c.Advance(time.Hour)
	expect("next window", "b", []limiter.Source{store, store, store, store, store}, []bool{true, true, true, true, false})
}

const refundYAML = `
domain: failover
rules:
  - {rule_id: probe, key_type: k, limit: 1000000, window_seconds: 3600, failure_mode: open, conditions: {mode: probe}}
  - {rule_id: local, key_type: k, limit: 4, window_seconds: 3600, algorithm: FixedWindow, failure_mode: local, conditions: {mode: local}}
  - {rule_id: gate, key_type: k, limit: 1, window_seconds: 3600, algorithm: FixedWindow, failure_mode: open, conditions: {gate: "on"}}
`

// TestLocalModeRefundsBothCounts: after an outage, a key decided locally
// is charged to the local count beside the store; when another rule of
// the same item rejects, both admissions are given back, so the local
// count does not keep what was never admitted.
func TestLocalModeRefundsBothCounts(t *testing.T) {
	srv := redistest.Start(t)
	c := newClock()
	l := redisLimiter(t, srv, c, refundYAML, func(cfg *limiter.Config) { cfg.Instances = twoInstances{} })
	ctx := context.Background()
	check := func(attrs map[string]string) limiter.Response {
		t.Helper()
		resp, err := l.Check(ctx, limiter.Request{Items: []limiter.Item{{Attributes: attrs}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	local := map[string]string{"mode": "local", "k": "d"}
	// Redis down: d's first request is decided locally (1 of the 2 this
	// instance may admit of 4).
	srv.Stop()
	if r := check(local).Items[0].Results[0]; r.Source != limiter.SourceFailureLocal || !r.Allowed {
		t.Fatalf("Redis down: %v allowed=%v, want failure_local allowed", r.Source, r.Allowed)
	}
	srv.Restart(t)
	deadline := time.Now().Add(5 * time.Second)
	for check(map[string]string{"mode": "probe", "k": "x"}).Items[0].Results[0].Source != limiter.SourceStore {
		if time.Now().After(deadline) {
			t.Fatal("Redis back for 5 s: still not deciding from it")
		}
		c.Advance(100 * time.Millisecond)
		time.Sleep(20 * time.Millisecond)
	}
	// The gate's one request for d goes first; then an item both rules
	// match: local admits (store and local count), the gate rejects, and
	// local's admission is given back to both.
	if !check(map[string]string{"gate": "on", "k": "d"}).Allowed {
		t.Fatal("the gate's first request for d was rejected")
	}
	both := check(map[string]string{"mode": "local", "gate": "on", "k": "d"})
	if both.Allowed || len(both.Items[0].Results) != 2 {
		t.Fatalf("an item of both rules: allowed=%v with %d results, want rejected by the gate with 2", both.Allowed, len(both.Items[0].Results))
	}
	// The local count holds d's one admission, not two: one more fits.
	if r := check(local).Items[0].Results[0]; !r.Allowed {
		t.Fatalf("d after the refund: %v allowed=%v, want allowed (the local count was given back)", r.Source, r.Allowed)
	}
	if r := check(local).Items[0].Results[0]; r.Allowed {
		t.Fatalf("d's third admission: %v allowed, want rejected at this instance's 2", r.Source)
	}
}

// The warning of decisions gone to their failure modes names the store's
// last error and its node, which its counts by reason do not say (a
// stopped server here; MOVED or CLUSTERDOWN on a misnamed cluster).
func TestFallbackWarningNamesTheStoreError(t *testing.T) {
	srv := redistest.Start(t)
	var logs bytes.Buffer
	l := redisLimiter(t, srv, newClock(), failoverYAML, func(cfg *limiter.Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	srv.Stop()
	resp, err := l.Check(context.Background(), limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"mode": "local", "k": "a"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Items[0].Results[0].Source; got != limiter.SourceFailureLocal {
		t.Fatalf("with Redis stopped: source %v, want failure_local", got)
	}
	line := logs.String()
	if !strings.Contains(line, "failure modes instead of the store") || !strings.Contains(line, `last_error="redisstore: `) || !strings.Contains(line, "last_error_node="+srv.Addr) {
		t.Errorf("log %q: want the fallback warning naming the store's error and node %s", line, srv.Addr)
	}
}
