package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/redistest"
)

// modesYAML has one rule per failure mode, selected by the attribute mode.
const modesYAML = `
domain: modes
rules:
  - {rule_id: open, conditions: {mode: open}, key_type: k, limit: 1000, window_seconds: 86400, algorithm: FixedWindow, failure_mode: open}
  - {rule_id: closed, conditions: {mode: closed}, key_type: k, limit: 1000, window_seconds: 86400, algorithm: FixedWindow, failure_mode: closed}
  - {rule_id: local, conditions: {mode: local}, key_type: k, limit: 30, window_seconds: 86400, algorithm: FixedWindow, failure_mode: local}
`

// localLimit is the limit of the rule local, which the limiter enforces in
// its own memory while Redis is away (it is the DC's only instance).
const localLimit = 30

var modes = []string{"open", "closed", "local"}

func modeBody(mode string) string {
	return fmt.Sprintf(`{"attributes":{"mode":%q,"k":"x"}}`, mode)
}

// TestRedisFailure hangs Redis (SIGSTOP), then kills it (SIGKILL), and
// checks that every rule follows its failure mode, that a dead Redis adds
// almost nothing to a decision once the circuit breaker has opened, that
// /readyz reports the outage, and that the limiter goes back to Redis when
// it returns.
func TestRedisFailure(t *testing.T) {
	skipShort(t)
	srv := redistest.Start(t)
	rulesPath := filepath.Join(t.TempDir(), "modes.yaml")
	writeFile(t, rulesPath, modesYAML)
	// The default store timeout, 20ms, is the one under test.
	p := startLimiter(t, []string{"--redis", srv.Addr, "--rules", rulesPath, "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"})
	const storeTimeout = 20 * time.Millisecond

	// recovered waits for each rule to be decided by Redis again. The key
	// x of the rule local was decided in memory during the outage, and
	// Redis never saw those admissions: until the window ends, its spent
	// count still holds (failure_local, 429), and a fresh key is Redis's.
	fresh := 0
	recovered := func(t *testing.T) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for _, mode := range modes {
			body := modeBody(mode)
			if mode == "local" {
				fresh++
				body = fmt.Sprintf(`{"attributes":{"mode":"local","k":"fresh-%d"}}`, fresh)
			}
			for {
				r, resp := p.check(t, body)
				if len(resp.Results) == 1 && resp.Results[0].Source == "store" {
					if r.code != http.StatusOK {
						t.Errorf("%s from the store: got %d %s, want 200", mode, r.code, r.body)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: Redis back for 5s, still got %d %s", mode, r.code, r.body)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		if r, resp := p.check(t, modeBody("local")); r.code != http.StatusTooManyRequests || len(resp.Results) != 1 || resp.Results[0].Source != "failure_local" {
			t.Errorf("local, key x spent in memory, Redis back: got %d %s, want 429 from failure_local", r.code, r.body)
		}
		for {
			r := p.get(t, "/readyz")
			if r.code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("readyz with Redis back for 5s: got %d %s, want 200", r.code, r.body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// localSpent counts what the rule local admitted for key x, from memory
	// or from Redis (memory counts Redis's admissions too), across outages:
	// the limiter keeps that count for the rule's whole window.
	localSpent := 0
	outage := func(t *testing.T) {
		t.Helper()
		// Until the breaker opens (3 failures), a request may wait for the
		// store timeout; after that, none may.
		const settle = 5
		var lat []time.Duration
		for i := range 201 {
			mode := modes[i%len(modes)]
			r, resp := p.check(t, modeBody(mode))
			if i < settle {
				if r.took > storeTimeout+500*time.Millisecond {
					t.Errorf("request %d before the breaker opened: took %v, want about the store timeout %v", i, r.took, storeTimeout)
				}
			} else {
				lat = append(lat, r.took)
			}
			if len(resp.Results) != 1 {
				t.Fatalf("request %d (%s): got %d %s, want one result", i, mode, r.code, r.body)
			}
			res := resp.Results[0]
			var wantSource string
			var wantAllowed bool
			switch mode {
			case "open":
				wantSource, wantAllowed = "failure_open", true
				if v(res.Limit) != 1000 || v(res.Remaining) != 1000 {
					t.Errorf("request %d (open): got limit %d remaining %d, want 1000 and 1000", i, v(res.Limit), v(res.Remaining))
				}
			case "closed":
				wantSource = "failure_closed"
				if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
					t.Errorf("request %d (closed): got Retry-After %q, want >= 1", i, r.header.Get("Retry-After"))
				}
			case "local":
				wantSource, wantAllowed = "failure_local", localSpent < localLimit
				if wantAllowed {
					localSpent++
				}
				if v(res.Limit) != localLimit {
					t.Errorf("request %d (local): got limit %d, want %d", i, v(res.Limit), localLimit)
				}
			}
			wantCode := http.StatusOK
			if !wantAllowed {
				wantCode = http.StatusTooManyRequests
			}
			if res.Source != wantSource || resp.Allowed != wantAllowed || r.code != wantCode {
				t.Fatalf("request %d (%s): got %d source %s allowed=%v, want %d source %s allowed=%v",
					i, mode, r.code, res.Source, resp.Allowed, wantCode, wantSource, wantAllowed)
			}
			// Pace the requests over about 1.5s, so that the breaker lets
			// probes through (every 500ms) while they run.
			time.Sleep(5 * time.Millisecond)
		}
		// Client-side latency over loopback, JSON both ways, with the race
		// detector in the test process, on a 2-core machine shared with
		// other work: the bounds are loose on purpose. A store call that
		// waited for the timeout would show as >= 20ms.
		slices.Sort(lat)
		median, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
		t.Logf("with the breaker open: %d requests, median %v, p99 %v, max %v", len(lat), median, p99, lat[len(lat)-1])
		if median > 5*time.Millisecond {
			t.Errorf("median latency: got %v, want < 5ms", median)
		}
		if p99 > 20*time.Millisecond {
			t.Errorf("p99 latency: got %v, want < 20ms", p99)
		}
		start := time.Now()
		if r := p.get(t, "/readyz"); r.code != http.StatusServiceUnavailable {
			t.Errorf("readyz with Redis down: got %d %s, want 503", r.code, r.body)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("readyz with Redis down took %v", d)
		}
	}

	// The warm-up ends with one admission from Redis per rule.
	localSpent = warmUp(t, srv, p, strings.Join([]string{modeBody("open"), modeBody("closed"), modeBody("local")}, "\n")) + 1

	t.Run("paused", func(t *testing.T) {
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		outage(t)
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
		recovered(t)
	})
	t.Run("paused then killed", func(t *testing.T) {
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		srv.Stop() // SIGKILL to the stopped process
		outage(t)
		srv.Restart(t)
		recovered(t)
	})

	m := p.metrics(t)
	for _, name := range []string{
		`weir_decisions_total{domain="modes",result="allowed",rule="open",source="failure_open"}`,
		`weir_decisions_total{domain="modes",result="rejected",rule="closed",source="failure_closed"}`,
		`weir_decisions_total{domain="modes",result="allowed",rule="local",source="failure_local"}`,
		`weir_decisions_total{domain="modes",result="rejected",rule="local",source="failure_local"}`,
		`weir_store_errors_total`,
	} {
		if got := metric(m, name); got < 1 {
			t.Errorf("%s: got %v, want >= 1", name, got)
		}
	}
	if got := metric(m, `weir_store_breaker_state{node="`+srv.Addr+`"}`); got != 0 {
		t.Errorf("breaker state after recovery: got %v, want 0 (closed)", got)
	}
	var opened int
	for _, rec := range p.logs("store circuit breaker changed state") {
		if rec["state"] == "open" {
			opened++
		}
	}
	if opened < 2 {
		t.Errorf("breaker opened %d times in the log, want at least 2 (one per outage)", opened)
	}
	// go-redis's own lines (its dials to the killed server failed) are in
	// the limiter's structured log, not on stderr in a format of their own.
	dials := 0
	for _, rec := range p.logs("redis client") {
		if d, _ := rec["detail"].(string); strings.Contains(d, "dial") {
			dials++
		}
	}
	if dials == 0 {
		t.Error(`no "redis client" log record of a failed dial`)
	}
	for _, l := range p.logLines() {
		if !json.Valid([]byte(l)) {
			t.Errorf("a log line that is not JSON: %s", l)
		}
	}
}
