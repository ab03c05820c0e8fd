package limiterd_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/etcd/etcdclient"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/internal/testkit/wait"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestRestartWithoutEtcdKeepsShares: a limiter given 3 of a global 30
// per 5 minutes, restarted while etcd is down, admits 3 with its
// --state-dir and its static 10 without one.
func TestRestartWithoutEtcdKeepsShares(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	var layout etcdlayout.Layout
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	put := func(key string, m proto.Message) {
		t.Helper()
		v, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, key, string(v)); err != nil {
			t.Fatal(err)
		}
	}
	put(layout.Lease("a"), &weirv1.AssignmentLease{Dc: "a", Epoch: 1, ValidUntilMs: time.Now().Add(time.Hour).UnixMilli(), TtlMs: time.Hour.Milliseconds(), Leader: "test"})
	put(layout.Assignment("a", "api", "g"), &weirv1.RuleAssignment{Dc: "a", Domain: "api", RuleId: "g", Epoch: 1, Share: 0.1, Limit: 3, GlobalLimit: 30})

	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte("domain: api\nrules:\n  - rule_id: g\n    path_pattern: /g\n    limit: 30\n    window_seconds: 300\n    algorithm: FixedWindow\n    scope: global\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	cfg := func(stateDir string) limiterd.Config {
		return limiterd.Config{DC: "a", DCs: []string{"a", "b", "c"}, RulesFile: rules, Etcd: etcd.Endpoints(),
			StateDir: stateDir, SyncTimeout: 500 * time.Millisecond}
	}
	// admitted counts the requests admitted out of 12.
	admitted := func(base string) int {
		t.Helper()
		n := 0
		for range 12 {
			allowed, matched := check(ctx, t, base, `{"domain":"api","attributes":{"path":"/g"}}`)
			if !matched {
				t.Fatal("check: no rule matched")
			}
			if allowed {
				n++
			}
		}
		return n
	}

	base, stop := runLimiter(t, cfg(state))
	if got := admitted(base); got != 3 {
		t.Fatalf("with its share of 3 in force: admitted %d of 12, want 3", got)
	}
	// Saved before it is acknowledged, after it is applied: soon.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := os.Stat(filepath.Join(state, "quota-a.pb"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state file: %v", err)
		}
	}
	// The file is in place a moment before the save is counted.
	saved := regexp.MustCompile(`weir_state_saves_total\{result="ok",state="quota"\} [1-9]`)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m := metricsText(t, base)
		if saved.MatchString(m) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no successful save of the quota state in the metrics:\n%s", grepLines(m, "weir_state_saves_total"))
		}
	}
	stop()
	etcd.Stop()

	base, stop = runLimiter(t, cfg(state))
	if got := admitted(base); got != 3 {
		t.Errorf("restarted with etcd down and its state: admitted %d of 12, want min(static 10, saved 3) = 3", got)
	}
	stop()
	base, stop = runLimiter(t, cfg(""))
	defer stop()
	if got := admitted(base); got != 10 {
		t.Errorf("restarted with etcd down and no state: admitted %d of 12, want its static 10", got)
	}
}

// runLimiter runs limiterd with cfg on free loopback ports until the
// returned stop is called (or the test ends). A nil cfg.Logger logs
// warnings and errors to the test's output.
func runLimiter(t *testing.T, cfg limiterd.Config) (base string, stop func()) {
	t.Helper()
	base, _, stop = runLimiterGRPC(t, cfg)
	return base, stop
}

// runLimiterGRPC is runLimiter that also returns the gRPC address.
func runLimiterGRPC(t *testing.T, cfg limiterd.Config) (base, grpcAddr string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	type bound struct{ base, grpcAddr string }
	addrs := make(chan bound, 1)
	done := make(chan error, 1)
	cfg.HTTPAddr, cfg.GRPCAddr = "127.0.0.1:0", "127.0.0.1:0"
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	cfg.Ready = func(httpAddr, grpcAddr string) { addrs <- bound{"http://" + httpAddr, grpcAddr} }
	go func() { done <- limiterd.Run(ctx, cfg) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("limiterd: %v", err)
		}
	}
	select {
	case b := <-addrs:
		t.Cleanup(stop)
		return b.base, b.grpcAddr, stop
	case err := <-done:
		cancel()
		t.Fatalf("limiterd stopped: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		<-done
		t.Fatal("limiterd did not start within 30s")
	}
	return "", "", nil
}

// TestRestartWithoutEtcdKeepsRules: a limiter that reads its rules from
// etcd, restarted while etcd is down, serves the rules it had with its
// --state-dir, and none without.
func TestRestartWithoutEtcdKeepsRules(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	putPerUserRule(ctx, t, cli)
	state := filepath.Join(t.TempDir(), "state")
	cfg := func(stateDir string) limiterd.Config {
		return limiterd.Config{DC: "a", Etcd: etcd.Endpoints(), StateDir: stateDir, SyncTimeout: 500 * time.Millisecond}
	}

	base, stop := runLimiter(t, cfg(state))
	if m, a := fourChecks(ctx, t, base); m != 4 || a != 2 {
		t.Fatalf("with the rule listed: %d matched, %d admitted of 4; want 4 and 2", m, a)
	}
	if v := rulesVersion(t, base); !strings.HasPrefix(v, "etcd-") || v == "etcd-0" {
		t.Errorf("rules version from etcd: %q, want etcd-{revision}", v)
	}
	m := metricsText(t, base)
	if !regexp.MustCompile(`weir_state_saves_total\{result="ok",state="rules"\} [1-9]`).MatchString(m) {
		t.Errorf("no successful save of the rules in the metrics:\n%s", grepLines(m, "weir_state_saves_total"))
	}
	stop()
	etcd.Stop()

	base, stop = runLimiter(t, cfg(state))
	if m, a := fourChecks(ctx, t, base); m != 4 || a != 2 {
		t.Errorf("restarted with etcd down and its state: %d matched, %d admitted of 4; want the saved rule: 4 and 2", m, a)
	}
	if v := rulesVersion(t, base); v != "saved" {
		t.Errorf("rules version after the restart: %q, want saved", v)
	}
	stop()
	base, stop = runLimiter(t, cfg(""))
	defer stop()
	if m, _ := fourChecks(ctx, t, base); m != 0 {
		t.Errorf("restarted with etcd down and no state: %d matched; want 0, no rule known", m)
	}
}

// TestRestartWithEtcdUserWhileEtcdDown: a limiter that logs in to etcd
// as a user (--etcd-user), restarted while etcd is down, starts with the
// rules its --state-dir saved, as one without a user does; once etcd is
// back it logs in and lists the rules again.
func TestRestartWithEtcdUserWhileEtcdDown(t *testing.T) {
	etcd := etcdtest.Start(t)
	admin := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	putPerUserRule(ctx, t, admin)
	etcdtest.EnableAuth(t, admin, etcdtest.WeirUser())
	password := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(password, []byte("weirpw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := limiterd.Config{
		DC: "a", Etcd: etcd.Endpoints(), StateDir: filepath.Join(t.TempDir(), "state"), SyncTimeout: 500 * time.Millisecond,
		EtcdAuth: etcdclient.Auth{User: "weir", PasswordFile: password},
	}

	base, stop := runLimiter(t, cfg)
	if m, a := fourChecks(ctx, t, base); m != 4 || a != 2 {
		t.Fatalf("logged in, the rule listed: %d matched, %d admitted of 4; want 4 and 2", m, a)
	}
	wait.For(t, 10*time.Second, "the rules saved", func() bool {
		return regexp.MustCompile(`weir_state_saves_total\{result="ok",state="rules"\} [1-9]`).MatchString(metricsText(t, base))
	})
	stop()
	etcd.Stop()

	base, stop = runLimiter(t, cfg)
	defer stop()
	if m, a := fourChecks(ctx, t, base); m != 4 || a != 2 {
		t.Errorf("restarted with etcd down: %d matched, %d admitted of 4; want the saved rule: 4 and 2", m, a)
	}
	if v := rulesVersion(t, base); v != "saved" {
		t.Errorf("rules version after the restart: %q, want saved", v)
	}
	etcd.Restart()
	wait.For(t, 30*time.Second, "the rules listed from etcd once it answers", func() bool { return strings.HasPrefix(rulesVersion(t, base), "etcd-") })
}

// fourChecks makes 4 checks of user u of domain api and returns how many
// matched a rule and how many were admitted.
func fourChecks(ctx context.Context, t *testing.T, base string) (matched, admitted int) {
	t.Helper()
	for range 4 {
		a, m := check(ctx, t, base, `{"domain":"api","attributes":{"user_id":"u"}}`)
		if m {
			matched++
		}
		if a {
			admitted++
		}
	}
	return matched, admitted
}

// rulesVersion returns the version of domain api's rules in the
// limiter's metrics (weir_rules_version_info), "" when none.
func rulesVersion(t *testing.T, base string) string {
	t.Helper()
	v := regexp.MustCompile(`weir_rules_version_info\{domain="api",version="([^"]*)"\} 1`).FindStringSubmatch(metricsText(t, base))
	if v == nil {
		return ""
	}
	return v[1]
}

// check posts body to the limiter's /v1/check and returns its answer.
func check(ctx context.Context, t *testing.T, base, body string) (allowed, matched bool) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/check", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a struct{ Allowed, Matched bool }
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("check: %d %s", resp.StatusCode, b)
	}
	return a.Allowed, a.Matched
}

// metricsText returns the limiter's /metrics page.
func metricsText(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, s) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return strings.Join(out, "\n")
}
