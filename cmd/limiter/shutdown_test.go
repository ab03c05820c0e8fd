package main_test

import (
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestShutdownDelaySignals: with --shutdown-delay, SIGTERM makes the
// limiter fail its readiness check while it goes on deciding; a second
// SIGTERM ends it at once instead of at the end of the delay.
func TestShutdownDelaySignals(t *testing.T) {
	skipShort(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, rules, rulesYAML)
	p := startLimiter(t, []string{"--rules", rules, "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--shutdown-delay", "10m"})
	if r := p.get(t, "/readyz"); r.code != http.StatusOK {
		t.Fatalf("/readyz before SIGTERM: got %d %s, want 200", r.code, r.body)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, "limiter shutting down", 1, 5*time.Second)
	if r := p.get(t, "/readyz"); r.code != http.StatusServiceUnavailable {
		t.Errorf("/readyz after SIGTERM: got %d %s, want 503", r.code, r.body)
	}
	if r, got := p.check(t, checkBody("fw", "during-delay")); r.code != http.StatusOK || !got.Allowed {
		t.Errorf("check during the delay: got %d %s, want 200 allowed", r.code, r.body)
	}
	p.signal(t, syscall.SIGTERM, 10*time.Second)
}
