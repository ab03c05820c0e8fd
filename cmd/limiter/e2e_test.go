package main_test

// End-to-end tests: the limiter binary, built once, run against a real
// redis-server and driven over HTTP and gRPC as a gateway would. They are
// skipped with -short, and (loudly) when redis-server is not installed.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/internal/dc/httpapi"
	"github.com/weirhq/weir/internal/testkit/grpctest"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/pkg/store/redisstore"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// limiterBin is the binary under test, built by TestMain.
var limiterBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "weir-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	limiterBin = filepath.Join(dir, "limiter")
	build := exec.Command("go", "build", "-o", limiterBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build the limiter:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
}

// proc is a running limiter process.
type proc struct {
	cmd        *exec.Cmd
	http, grpc string // bound addresses, from the "limiter started" log line
	started    map[string]any

	mu    sync.Mutex
	lines []string

	exited  chan struct{}
	waitErr error
}

// startLimiter runs the binary with args and env (on top of the test's
// environment without its WEIR_ variables) and waits until it logs that it
// started. The process is killed when t ends, if it is still running.
func startLimiter(t testing.TB, args []string, env ...string) *proc {
	t.Helper()
	p, err := launch(args, env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("limiter log:\n%s", strings.Join(p.logLines(), "\n"))
		}
	})
	started := make(chan struct{})
	go func() {
		for {
			if l, ok := p.findLog("limiter started"); ok {
				p.started = l
				close(started)
				return
			}
			select {
			case <-p.exited:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	select {
	case <-started:
	case <-p.exited:
		t.Fatalf("limiter exited before starting (%v):\n%s", p.waitErr, strings.Join(p.logLines(), "\n"))
	case <-time.After(15 * time.Second):
		t.Fatalf("limiter did not start in 15s:\n%s", strings.Join(p.logLines(), "\n"))
	}
	p.http, _ = p.started["http"].(string)
	p.grpc, _ = p.started["grpc"].(string)
	if p.http == "" || p.grpc == "" {
		t.Fatalf("started line without addresses: %v", p.started)
	}
	return p
}

// launch starts the binary and collects its stderr.
func launch(args []string, env ...string) (*proc, error) {
	cmd := exec.Command(limiterBin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEIR_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) logLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lines)
}

// logs returns the JSON log records whose msg is msg.
func (p *proc) logs(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range p.logLines() {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

func (p *proc) findLog(msg string) (map[string]any, bool) {
	recs := p.logs(msg)
	if len(recs) == 0 {
		return nil, false
	}
	return recs[len(recs)-1], true
}

// waitLog waits up to d for n records with msg.
func (p *proc) waitLog(t *testing.T, msg string, n int, d time.Duration) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if recs := p.logs(msg); len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("log: got %d records %q in %v, want %d", len(p.logs(msg)), msg, d, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signal sends sig and waits up to d for the process to exit; it returns
// the exit code.
func (p *proc) signal(t *testing.T, sig syscall.Signal, d time.Duration) int {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	return p.wait(t, d)
}

func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(d):
		t.Fatalf("limiter still running %v after the signal", d)
	}
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		return ee.ExitCode()
	}
	if p.waitErr != nil {
		t.Fatal(p.waitErr)
	}
	return 0
}

// reply is an HTTP response, read.
type reply struct {
	code   int
	header http.Header
	body   []byte
	took   time.Duration
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

func (p *proc) do(t testing.TB, method, path, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+p.http+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, b, time.Since(start)}
}

func (p *proc) post(t testing.TB, path, body string) reply {
	t.Helper()
	return p.do(t, http.MethodPost, path, body)
}

func (p *proc) get(t testing.TB, path string) reply {
	t.Helper()
	return p.do(t, http.MethodGet, path, "")
}

func (p *proc) check(t testing.TB, body string) (reply, httpapi.CheckResponse) {
	t.Helper()
	r := p.post(t, "/v1/check", body)
	var resp httpapi.CheckResponse
	if r.code == http.StatusOK || r.code == http.StatusTooManyRequests || r.code == http.StatusForbidden {
		if err := json.Unmarshal(r.body, &resp); err != nil {
			t.Fatalf("check %s: body %s: %v", body, r.body, err)
		}
	}
	return r, resp
}

func (p *proc) metrics(t testing.TB) string {
	t.Helper()
	r := p.get(t, "/metrics")
	if r.code != http.StatusOK {
		t.Fatalf("metrics: got %d, want 200", r.code)
	}
	return string(r.body)
}

// metric returns the value of the sample whose line starts with name
// (with its labels), or -1.
func metric(text, name string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(l, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

func (p *proc) dial(t *testing.T) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	// Write then rename, so the limiter never reads half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// algorithms are the rule ids of rulesYAML that have one algorithm each.
var algorithms = []string{"tb", "lb", "fw", "swl", "swc"}

// rulesYAML has one rule per algorithm, each selected by the attribute
// alg, with windows of a day so that no window ends during a test.
const rulesYAML = `
domain: e2e
rules:
  - {rule_id: tb, conditions: {alg: tb}, key_type: user, limit: 3, window_seconds: 86400, algorithm: TokenBucket}
  - {rule_id: lb, conditions: {alg: lb}, key_type: user, limit: 3, window_seconds: 86400, algorithm: LeakyBucket, burst: 3}
  - {rule_id: fw, conditions: {alg: fw}, key_type: user, limit: 3, window_seconds: 86400, algorithm: FixedWindow}
  - {rule_id: swl, conditions: {alg: swl}, key_type: user, limit: 3, window_seconds: 86400, algorithm: SlidingWindowLog}
  - {rule_id: swc, conditions: {alg: swc}, key_type: user, limit: 3, window_seconds: 86400, algorithm: SlidingWindowCounter}
  - rule_id: ovr
    conditions: {alg: ovr}
    key_type: user
    limit: 3
    window_seconds: 86400
    algorithm: FixedWindow
    rejection_message: Slow down.
    overrides:
      - {key: vip, limit: 5}
      - {key: banned, action: deny}
      - {key: friend, action: allow}
  - {rule_id: shadow, conditions: {alg: shadow}, key_type: user, limit: 1, window_seconds: 86400, algorithm: FixedWindow, shadow: true}
  - {rule_id: seed, key_type: client_id, limit: 2, window_seconds: 86400, algorithm: FixedWindow}
`

func checkBody(alg, user string) string {
	return fmt.Sprintf(`{"domain":"e2e","attributes":{"alg":%q,"user":%q,"path":"/api","method":"GET"},"hits":1}`, alg, user)
}

// TestEndToEnd runs the limiter against Redis and checks every algorithm
// over HTTP and gRPC, overrides, shadow rules, the seed API, status,
// metrics, hot reload and graceful shutdown.
func TestEndToEnd(t *testing.T) {
	skipShort(t)
	srv := redistest.Start(t)
	rulesPath := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, rulesPath, rulesYAML)
	// This test is about decisions, not timeouts (TestRedisFailure is): a
	// generous store timeout keeps a busy machine from turning a slow
	// Redis call into a failure-mode decision.
	p := startLimiter(t, []string{"--dc", "e2e-dc", "--redis", srv.Addr, "--rules", rulesPath,
		"--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--rules-poll", "200ms", "--store-timeout", "500ms"})
	if got := p.started["store"]; got != "redis" {
		t.Errorf("started with store %v, want redis", got)
	}
	if got := p.started["dc"]; got != "e2e-dc" {
		t.Errorf("started with dc %v, want e2e-dc", got)
	}
	warmUp(t, srv, p, `{"attributes":{"client_id":"warm-up"}}`)
	conn := p.dial(t)
	client := weirv1.NewLimiterClient(conn)

	t.Run("algorithms over HTTP", func(t *testing.T) {
		for _, alg := range algorithms {
			t.Run(alg, func(t *testing.T) {
				body := checkBody(alg, "h-"+alg)
				for i := range 3 {
					r, resp := p.check(t, body)
					want := int64(2 - i)
					if r.code != http.StatusOK || !resp.Allowed {
						t.Fatalf("request %d: got %d %s, want 200 allowed", i, r.code, r.body)
					}
					if resp.RuleID != alg || v(resp.Limit) != 3 || v(resp.Remaining) != want || !resp.Matched || len(resp.Results) != 1 {
						t.Errorf("request %d: got %s, want rule %s, limit 3, remaining %d, one result", i, r.body, alg, want)
					}
					if src := resp.Results[0].Source; src != "store" {
						t.Errorf("request %d: got source %q, want store", i, src)
					}
					wantHeaders(t, r, map[string]string{
						"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": strconv.FormatInt(want, 10),
						"RateLimit-Policy": fmt.Sprintf(`"%s";q=3;w=86400`, alg), "Retry-After": "",
					})
					wantRateLimit(t, r, alg, want)
					wantResetAt(t, resp.ResetAt)
				}
				for i := range 2 {
					r, resp := p.check(t, body)
					if r.code != http.StatusTooManyRequests || resp.Allowed {
						t.Fatalf("request %d over the limit: got %d %s, want 429", 3+i, r.code, r.body)
					}
					if resp.RuleID != alg || v(resp.Remaining) != 0 || v(resp.RetryAfterSeconds) <= 0 || resp.Error != "RATE_LIMIT_EXCEEDED" || resp.Message == "" {
						t.Errorf("rejection: got %s, want rule %s, remaining 0, retry_after_seconds > 0, an error and a message", r.body, alg)
					}
					if src := resp.Results[0].Source; src != "store" && src != "cache" {
						t.Errorf("rejection: got source %q, want store or cache", src)
					}
					ra, err := strconv.Atoi(r.header.Get("Retry-After"))
					if err != nil || ra < 1 || int64(ra) != v(resp.RetryAfterSeconds) {
						t.Errorf("Retry-After: got %q, want %d (>= 1)", r.header.Get("Retry-After"), v(resp.RetryAfterSeconds))
					}
					wantHeaders(t, r, map[string]string{"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0"})
					wantRateLimit(t, r, alg, 0)
				}
				r := p.get(t, "/v1/rate-limits/"+alg+"/h-"+alg)
				var st httpapi.StatusResponse
				if err := json.Unmarshal(r.body, &st); r.code != http.StatusOK || err != nil {
					t.Fatalf("status: got %d %s, want 200", r.code, r.body)
				}
				if st.RuleID != alg || st.Key != "h-"+alg || v(st.Limit) != 3 || v(st.Remaining) != 0 || st.WindowSeconds != 86400 || st.Source != "store" {
					t.Errorf("status: got %s, want limit 3, remaining 0, window 86400 from the store", r.body)
				}
				wantResetAt(t, st.ResetTime)
			})
		}
	})

	t.Run("algorithms over gRPC", func(t *testing.T) {
		for _, alg := range algorithms {
			t.Run(alg, func(t *testing.T) {
				it := &weirv1.CheckItem{Attributes: map[string]string{"alg": alg, "user": "g-" + alg}, Hits: 1}
				for i := range 4 {
					resp, err := client.Check(ctx(t), &weirv1.CheckRequest{Domain: "e2e", Items: []*weirv1.CheckItem{it}})
					if err != nil {
						t.Fatal(err)
					}
					wantAllowed := i < 3
					ir := resp.GetItems()[0]
					r := ir.GetResults()[ir.GetDecisive()]
					if resp.Allowed != wantAllowed || ir.Allowed != wantAllowed || r.Allowed != wantAllowed {
						t.Fatalf("request %d: got allowed=%v, want %v (%v)", i, resp.Allowed, wantAllowed, resp)
					}
					if r.RuleId != alg || r.Limit != 3 || r.Remaining != max(0, int64(2-i)) || r.WindowSeconds != 86400 {
						t.Errorf("request %d: got %v, want rule %s, limit 3, remaining %d", i, r, alg, max(0, 2-i))
					}
					if r.Source != weirv1.Source_SOURCE_STORE {
						t.Errorf("request %d: got source %v, want STORE", i, r.Source)
					}
					if !wantAllowed && r.GetRetryAfter().AsDuration() <= 0 {
						t.Errorf("rejection: got retry_after %v, want > 0", r.GetRetryAfter().AsDuration())
					}
					if r.GetResetAt().AsTime().Before(time.Now().Add(-time.Minute)) {
						t.Errorf("reset_at %v is in the past", r.GetResetAt().AsTime())
					}
				}
				st, err := client.Status(ctx(t), &weirv1.StatusRequest{Domain: "e2e", RuleId: alg, Key: "g-" + alg})
				if err != nil {
					t.Fatal(err)
				}
				if r := st.GetResult(); r.Limit != 3 || r.Remaining != 0 || r.Source != weirv1.Source_SOURCE_STORE {
					t.Errorf("status: got %v, want limit 3, remaining 0 from the store", r)
				}
			})
		}
		// One call, every algorithm four times: the items are decided in
		// order in one round trip.
		var items []*weirv1.CheckItem
		for _, alg := range algorithms {
			for range 4 {
				items = append(items, &weirv1.CheckItem{Attributes: map[string]string{"alg": alg, "user": "m-" + alg}})
			}
		}
		resp, err := client.Check(ctx(t), &weirv1.CheckRequest{Items: items})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Allowed {
			t.Error("batch with rejected items: got allowed")
		}
		for i, ir := range resp.Items {
			if want := i%4 < 3; ir.Allowed != want {
				t.Errorf("batch item %d (%s): got allowed=%v, want %v", i, algorithms[i/4], ir.Allowed, want)
			}
		}
		_, err = client.Check(ctx(t), &weirv1.CheckRequest{Domain: "nope", Items: items[:1]})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("unknown domain: got %v, want InvalidArgument", err)
		}
		_, err = client.Status(ctx(t), &weirv1.StatusRequest{RuleId: "nope", Key: "k"})
		if status.Code(err) != codes.NotFound {
			t.Errorf("unknown rule: got %v, want NotFound", err)
		}
		var out []byte
		err = conn.Invoke(ctx(t), "/weir.v1.Limiter/Check", []byte{0x12, 0xff}, &out, grpc.ForceCodecV2(grpctest.RawCodec{}))
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("malformed protobuf: got %v, want InvalidArgument", err)
		}
		h, err := healthpb.NewHealthClient(conn).Check(ctx(t), &healthpb.HealthCheckRequest{Service: "weir.v1.Limiter"})
		if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health: got %v %v, want SERVING", h, err)
		}
	})

	t.Run("overrides and shadow", func(t *testing.T) {
		for i := range 6 {
			r, resp := p.check(t, checkBody("ovr", "vip"))
			if want := i < 5; resp.Allowed != want || v(resp.Limit) != 5 {
				t.Errorf("vip request %d: got %d %s, want allowed=%v under limit 5", i, r.code, r.body, want)
			}
		}
		r, resp := p.check(t, checkBody("ovr", "banned"))
		// A deny is for good: 403, no retry promised, not the rule's
		// message for a limit ("Slow down.").
		if r.code != http.StatusForbidden || resp.Results[0].Source != "override_deny" || resp.Error != "RATE_LIMIT_DENIED" ||
			resp.Message != `Access denied: rule "ovr" denies this key.` || resp.RetryAfterSeconds != nil || resp.Limit != nil {
			t.Errorf("banned: got %d %v %s, want 403 RATE_LIMIT_DENIED from override_deny with no retry and no limit", r.code, r.header, r.body)
		}
		wantHeaders(t, r, map[string]string{"Retry-After": "", "X-RateLimit-Limit": "", "RateLimit": ""})
		for range 5 {
			r, resp := p.check(t, checkBody("ovr", "friend"))
			if r.code != http.StatusOK || resp.Results[0].Source != "override_allow" {
				t.Fatalf("friend: got %d %s, want 200 from override_allow", r.code, r.body)
			}
			wantHeaders(t, r, map[string]string{"X-RateLimit-Remaining": "", "Retry-After": ""})
		}
		for i := range 2 {
			r, resp := p.check(t, checkBody("shadow", "s"))
			if r.code != http.StatusOK || !resp.Allowed || !resp.Results[0].Shadow || resp.Results[0].Allowed != (i == 0) {
				t.Errorf("shadow request %d: got %d %s, want 200 with the shadow rule allowed=%v", i, r.code, r.body, i == 0)
			}
			wantHeaders(t, r, map[string]string{"Retry-After": ""})
		}
		r, resp = p.check(t, `{"attributes":{"nothing":"here"}}`)
		if r.code != http.StatusOK || !resp.Allowed || resp.Matched || len(resp.Results) != 0 {
			t.Errorf("no match: got %d %s, want 200 allowed, matched false", r.code, r.body)
		}
		if r := p.post(t, "/v1/check", `{"attributes":{"user":1}}`); r.code != http.StatusBadRequest {
			t.Errorf("bad input: got %d %s, want 400", r.code, r.body)
		}
	})

	t.Run("seed API", func(t *testing.T) {
		for i, want := range []string{`{"allowed":true}`, `{"allowed":true}`, `{"allowed":false}`} {
			r := p.post(t, "/shouldAllowRequest", fmt.Sprintf(`{"clientId":"123","timestamp":%q}`, time.Now().UTC().Format(time.RFC3339)))
			if got := strings.TrimSpace(string(r.body)); r.code != http.StatusOK || got != want {
				t.Errorf("request %d: got %d %s, want 200 %s", i, r.code, got, want)
			}
		}
		if r := p.post(t, "/shouldAllowRequest", `{"clientId":"123","timestamp":"noon"}`); r.code != http.StatusBadRequest {
			t.Errorf("bad timestamp: got %d, want 400", r.code)
		}
	})

	t.Run("health and metrics", func(t *testing.T) {
		if r := p.get(t, "/healthz"); r.code != http.StatusOK {
			t.Errorf("healthz: got %d, want 200", r.code)
		}
		if r := p.get(t, "/readyz"); r.code != http.StatusOK {
			t.Errorf("readyz: got %d %s, want 200", r.code, r.body)
		}
		m := p.metrics(t)
		for _, alg := range algorithms {
			// 3 over HTTP, 3 over gRPC, 3 in the batch.
			if got := metric(m, fmt.Sprintf(`weir_decisions_total{domain="e2e",result="allowed",rule=%q,source="store"}`, alg)); got != 9 {
				t.Errorf("%s allowed decisions: got %v, want 9", alg, got)
			}
		}
		for _, want := range []string{
			`weir_decisions_total{domain="e2e",result="rejected",rule="ovr",source="override_deny"} 1`,
			`weir_decisions_total{domain="e2e",result="shadow_rejected",rule="shadow",source="store"} 1`,
			`weir_check_duration_seconds_bucket{le="0.001"}`,
			`weir_store_duration_seconds_bucket{le="0.001"}`,
			`weir_store_errors_total `,
			`weir_cache_absorbed_total`,
			`weir_rule_reloads_total{result="ok"} 1`,
			`weir_rule_reloads_total{result="rejected"} 0`,
			`weir_rules_version_info{domain="e2e",version="`,
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics: no %s", want)
			}
		}
	})

	t.Run("hot reload", func(t *testing.T) {
		before := rulesVersion(p.metrics(t))
		writeFile(t, rulesPath, strings.Replace(rulesYAML, "limit: 3, window_seconds: 86400, algorithm: FixedWindow}", "limit: 10, window_seconds: 86400, algorithm: FixedWindow}", 1))
		deadline := time.Now().Add(3 * time.Second)
		for {
			r, resp := p.check(t, checkBody("fw", "h-fw"))
			if r.code == http.StatusOK {
				// 3 spent before the reload, this one now: 6 of 10 left.
				if v(resp.Limit) != 10 || v(resp.Remaining) != 6 {
					t.Errorf("after the reload: got %s, want limit 10, remaining 6", r.body)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("new rules not in force 3s after the write: got %d %s", r.code, r.body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		after := rulesVersion(p.metrics(t))
		if after == "" || after == before {
			t.Errorf("rules version: got %q after %q, want a new one", after, before)
		}
		loaded := p.waitLog(t, "rules loaded", 2, time.Second)
		if v := loaded[len(loaded)-1]["version"]; v != after {
			t.Errorf("rules loaded log: got version %v, want %s", v, after)
		}
	})

	t.Run("invalid rules refused", func(t *testing.T) {
		version := rulesVersion(p.metrics(t))
		writeFile(t, rulesPath, "domain: e2e\nrules:\n  - {rule_id: fw, key_type: user, limit: ten, window_seconds: 60}\n")
		refused := p.waitLog(t, "refused new rules; the previous rules stay in force", 1, 3*time.Second)
		if msg, _ := refused[0]["err"].(string); !strings.Contains(msg, "limit") {
			t.Errorf("refusal log: got err %q, want the reason naming limit", msg)
		}
		if got := refused[0]["level"]; got != "ERROR" {
			t.Errorf("refusal log level: got %v, want ERROR", got)
		}
		m := p.metrics(t)
		if got := metric(m, `weir_rule_reloads_total{result="rejected"}`); got < 1 {
			t.Errorf(`weir_rule_reloads_total{result="rejected"}: got %v, want >= 1`, got)
		}
		if got := rulesVersion(m); got != version {
			t.Errorf("rules version after a refused file: got %q, want %q", got, version)
		}
		// The last good rules stay: fw still has 10, tb its algorithm.
		if r, resp := p.check(t, checkBody("fw", "h-fw")); r.code != http.StatusOK || v(resp.Limit) != 10 {
			t.Errorf("after a refused file: got %d %s, want 200 under limit 10", r.code, r.body)
		}
		if r, _ := p.check(t, checkBody("tb", "h-tb")); r.code != http.StatusTooManyRequests {
			t.Errorf("tb after a refused file: got %d, want 429", r.code)
		}
	})

	t.Run("graceful shutdown", func(t *testing.T) {
		// A request in flight: headers and half the body sent.
		body := checkBody("fw", "slow")
		c, err := net.DialTimeout("tcp", p.http, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:10])
		time.Sleep(100 * time.Millisecond)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		p.waitLog(t, "limiter shutting down", 1, 2*time.Second)
		// New connections are refused once the listener closes.
		deadline := time.Now().Add(2 * time.Second)
		for {
			nc, err := net.DialTimeout("tcp", p.http, 200*time.Millisecond)
			if err != nil {
				break
			}
			nc.Close()
			if time.Now().After(deadline) {
				t.Fatal("still accepting connections 2s after SIGTERM")
			}
			time.Sleep(20 * time.Millisecond)
		}
		select {
		case <-p.exited:
			t.Fatal("exited with a request in flight")
		default:
		}
		if _, err := io.WriteString(c, body[10:]); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("in-flight request: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"allowed":true`) {
			t.Errorf("in-flight request: got %d %s, want 200 allowed", resp.StatusCode, b)
		}
		if code := p.wait(t, 10*time.Second); code != 0 {
			t.Errorf("exit code: got %d, want 0", code)
		}
		p.waitLog(t, "limiter stopped", 1, time.Second)
	})
}

// warmUp loads the store's scripts into Redis and sends each check body
// (one per line) until the store decides it. A cold limiter's first
// decision pays for a new connection and, without the scripts, a NOSCRIPT
// round trip; on a loaded machine that can exceed the 20ms store timeout,
// and the decision then falls back to the rule's failure mode. It returns
// how many requests failure_mode local admitted meanwhile.
func warmUp(t *testing.T, srv *redistest.Server, p *proc, bodies string) (localAdmitted int) {
	t.Helper()
	rs, err := redisstore.New(srv.Client(t), redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Load(ctx(t)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, body := range strings.Split(bodies, "\n") {
		for {
			r, resp := p.check(t, body)
			if len(resp.Results) > 0 && resp.Results[0].Source == "store" {
				break
			}
			if len(resp.Results) > 0 && resp.Results[0].Source == "failure_local" && resp.Results[0].Allowed {
				localAdmitted++
			}
			if time.Now().After(deadline) {
				t.Fatalf("warm-up: the store did not decide in 5s: got %d %s", r.code, r.body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return localAdmitted
}

// rulesVersion returns the version label of weir_rules_version_info.
func rulesVersion(metrics string) string {
	m := regexp.MustCompile(`weir_rules_version_info\{domain="e2e",version="([^"]*)"\} 1`).FindStringSubmatch(metrics)
	if m == nil {
		return ""
	}
	return m[1]
}

// wantHeaders checks header fields; "" means absent.
func wantHeaders(t testing.TB, r reply, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if got := r.header.Get(name); got != w {
			t.Errorf("header %s: got %q, want %q", name, got, w)
		}
	}
}

// wantRateLimit checks the RateLimit field: the rule, remaining and a
// reset in (0, 2 days] (a sliding window counter is back to full at the
// end of the next window).
func wantRateLimit(t testing.TB, r reply, rule string, remaining int64) {
	t.Helper()
	got := r.header.Get("RateLimit")
	prefix := fmt.Sprintf(`"%s";r=%d;t=`, rule, remaining)
	rest, ok := strings.CutPrefix(got, prefix)
	secs, err := strconv.Atoi(rest)
	if !ok || err != nil || secs < 1 || secs > 2*86400 {
		t.Errorf("RateLimit: got %q, want %s<1..172800>", got, prefix)
	}
}

func wantResetAt(t testing.TB, s string) {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Errorf("reset time %q: %v", s, err)
		return
	}
	if now := time.Now(); at.Before(now.Add(-2*time.Second)) || at.After(now.Add(48*time.Hour)) {
		t.Errorf("reset time %v: want within two days from now", at)
	}
}

// TestEnvironment configures the limiter by WEIR_* variables alone, and
// checks that a flag wins over its variable.
func TestEnvironment(t *testing.T) {
	skipShort(t)
	rulesPath := filepath.Join(t.TempDir(), "rules.json")
	writeFile(t, rulesPath, `{"domain":"env","rules":[{"rule_id":"one","key_type":"k","limit":1,"window_seconds":86400,"algorithm":"FixedWindow"}]}`)
	env := []string{"WEIR_RULES=" + rulesPath, "WEIR_HTTP_ADDR=127.0.0.1:0", "WEIR_GRPC_ADDR=127.0.0.1:0", "WEIR_DC=env-dc", "WEIR_REDIS="}
	tests := []struct {
		name   string
		args   []string
		wantDC string
	}{
		{"environment only", nil, "env-dc"},
		{"a flag wins", []string{"--dc", "flag-dc"}, "flag-dc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startLimiter(t, tt.args, env...)
			if got := p.started["dc"]; got != tt.wantDC {
				t.Errorf("dc: got %v, want %s", got, tt.wantDC)
			}
			if got := p.started["store"]; got != "memory" {
				t.Errorf("store with an empty WEIR_REDIS: got %v, want memory", got)
			}
			for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
				if r := p.post(t, "/v1/check", `{"attributes":{"k":"x"}}`); r.code != want {
					t.Errorf("request %d: got %d %s, want %d", i, r.code, r.body, want)
				}
			}
			if code := p.signal(t, syscall.SIGTERM, 10*time.Second); code != 0 {
				t.Errorf("exit code after SIGTERM: got %d, want 0", code)
			}
			p.waitLog(t, "limiter stopped", 1, time.Second)
		})
	}

	bad := []struct {
		name string
		env  []string
		want string // in the output
	}{
		{"invalid duration", []string{"WEIR_STORE_TIMEOUT=soon"}, "WEIR_STORE_TIMEOUT"},
		{"no rules", []string{"WEIR_RULES="}, "rules"},
		{"missing rules file", []string{"WEIR_RULES=" + filepath.Join(t.TempDir(), "none.yaml")}, "none.yaml"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			p, err := launch(nil, append(slices.Clone(env), tt.env...)...)
			if err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t, 10*time.Second); code != 1 {
				t.Errorf("exit code: got %d, want 1", code)
			}
			if out := strings.Join(p.logLines(), "\n"); !strings.Contains(out, tt.want) {
				t.Errorf("output: got %q, want it to name %q", out, tt.want)
			}
		})
	}
}

// v is the value of an optional JSON number; -1 when absent.
func v(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}
