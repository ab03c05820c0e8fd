package limiterd_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/weirhq/weir/internal/dc/envoyrls"
	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/wait"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// writeRules writes a one-rule Weir rule file for a limiter (domain api,
// rule per-user: 5 per minute per user_id) and returns its path.
func writeRules(t *testing.T) string {
	t.Helper()
	return ruleFile(t, "domain: api\nrules:\n  - rule_id: per-user\n    key_type: user_id\n    limit: 5\n    window_seconds: 60\n")
}

// ruleFile writes yaml to a rule file of t's and returns its path.
func ruleFile(t *testing.T, yaml string) string {
	t.Helper()
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return rules
}

// TestGRPCHealthNames: gRPC health reports every name a health check may
// ask for — the server, weir.v1, Envoy's API and "ratelimit", which
// envoyproxy/ratelimit registers and its users' checks name — SERVING
// while the limiter runs and NOT_SERVING once it shuts down.
func TestGRPCHealthNames(t *testing.T) {
	_, grpcAddr, stop := runLimiterGRPC(t, limiterd.Config{RulesFile: writeRules(t), ShutdownGrace: 5 * time.Second})
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	health := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	names := []struct {
		name, service string
	}{
		{"server", ""},
		{"weir.v1", "weir.v1.Limiter"},
		{"Envoy's API", envoyrls.ServiceName},
		{"envoyproxy ratelimit's name", "ratelimit"},
	}
	watches := make([]healthpb.Health_WatchClient, len(names))
	for i, n := range names {
		t.Run(n.name, func(t *testing.T) {
			resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: n.service})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("Check(%q): got %v %v, want SERVING", n.service, resp.GetStatus(), err)
			}
			w, err := health.Watch(ctx, &healthpb.HealthCheckRequest{Service: n.service})
			if err != nil {
				t.Fatalf("Watch(%q): %v", n.service, err)
			}
			if resp, err := w.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("Watch(%q) first status: got %v %v, want SERVING", n.service, resp.GetStatus(), err)
			}
			watches[i] = w
		})
	}

	// The limiter's graceful stop waits for the open watches, which end
	// (cancel) once each has seen its status change.
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	for i, n := range names {
		if watches[i] == nil {
			continue
		}
		resp, err := watches[i].Recv()
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("%s (%q) at shutdown: got %v %v, want NOT_SERVING", n.name, n.service, resp.GetStatus(), err)
		}
	}
	cancel()
	<-stopped
}

// TestHealthcheckFollowsRedis: GET /healthcheck, envoyproxy/ratelimit's
// HTTP health check, answers 500 while the limiter's Redis does not
// answer — as envoyproxy/ratelimit's fails until its Redis connects — and
// 200 "OK" once it does, with /readyz.
func TestHealthcheckFollowsRedis(t *testing.T) {
	down := redistest.Start(t)
	down.Stop()
	base := startLimiter(t, limiterd.Config{Redis: down.Addr, RulesFile: writeRules(t)})
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthcheck"); code != http.StatusInternalServerError {
		t.Errorf("/healthcheck with Redis down: got %d %q, want 500", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with Redis down: got %d %q, want 503", code, body)
	}
	down.Restart(t)
	wait.For(t, 30*time.Second, "/healthcheck 200 once Redis answers", func() bool {
		code, body := get("/healthcheck")
		return code == http.StatusOK && body == "OK"
	})
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with Redis up: got %d %q, want 200", code, body)
	}
}

// TestShutdownDelay: with ShutdownDelay, a limiter that begins to shut
// down fails every health check at once — gRPC health NOT_SERVING, /readyz
// 503, /healthcheck 500 — and goes on deciding on both APIs until the
// delay ends, so that load balancers take it out of rotation before its
// ports close; then it stops.
func TestShutdownDelay(t *testing.T) {
	const delay = 5 * time.Second
	base, grpcAddr, stop := runLimiterGRPC(t, limiterd.Config{RulesFile: writeRules(t), ShutdownDelay: delay})
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	get := func(path string) int {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before shutdown: got %d, want 200", code)
	}

	began := time.Now()
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	wait.For(t, delay, "/readyz 503 once shutdown begins", func() bool { return get("/readyz") == http.StatusServiceUnavailable })
	if code := get("/healthcheck"); code != http.StatusInternalServerError {
		t.Errorf("/healthcheck while shutting down: got %d, want 500", code)
	}
	health, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "weir.v1.Limiter"})
	if err != nil || health.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("gRPC health while shutting down: got %v %v, want NOT_SERVING", health.GetStatus(), err)
	}
	resp, err := weirv1.NewLimiterClient(conn).Check(ctx, &weirv1.CheckRequest{Items: []*weirv1.CheckItem{{Attributes: map[string]string{"user_id": "a"}}}})
	if err != nil || !resp.GetAllowed() {
		t.Errorf("weir.v1 Check while shutting down: got %v %v, want allowed", resp, err)
	}
	post, err := http.Post(base+"/v1/check", "application/json", strings.NewReader(`{"attributes":{"user_id":"a"}}`))
	if err != nil {
		t.Fatalf("POST /v1/check while shutting down: %v", err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusOK {
		t.Errorf("POST /v1/check while shutting down: got %d, want 200", post.StatusCode)
	}
	select {
	case <-stopped:
		t.Fatalf("the limiter stopped %v after shutdown began, before its %v delay", time.Since(began), delay)
	default:
	}
	select {
	case <-stopped:
	case <-time.After(delay + 20*time.Second):
		t.Fatal("the limiter did not stop after its delay")
	}
	if _, err := http.Get(base + "/readyz"); err == nil {
		t.Error("the HTTP port still accepts after the limiter stopped")
	}
}
