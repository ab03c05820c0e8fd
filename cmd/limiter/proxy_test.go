package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/redistest"
)

const proxyYAML = `
domain: site
rules:
  - {rule_id: per-user, path_pattern: "/api/**", key_type: user_id, limit: 2, window_seconds: 60, algorithm: FixedWindow}
`

// TestReverseProxy runs the binary in reverse-proxy mode in front of an
// upstream, with a real redis-server: allowed requests reach the upstream
// with X-Forwarded-For set and come back with the rate-limit fields;
// rejected ones never reach it and get 429, Retry-After and the JSON body;
// a header too large for an attribute is a 400; an upstream that is gone
// is a 502.
func TestReverseProxy(t *testing.T) {
	skipShort(t)
	srv := redistest.Start(t)
	var served atomic.Int64
	var forwarded atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		forwarded.Store(r.Header.Get("X-Forwarded-For"))
		w.Header().Set("X-Upstream", "yes")
		_, _ = io.WriteString(w, "hello from "+r.URL.Path)
	}))
	defer up.Close()
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, rules, proxyYAML)
	p := startLimiter(t, []string{"--redis", srv.Addr, "--rules", rules, "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
		"--proxy-upstream", up.URL, "--proxy-addr", "127.0.0.1:0"}, "WEIR_PROXY_HEADERS=X-User-Id=user_id")
	addr, _ := p.started["proxy"].(string)
	if addr == "" {
		t.Fatalf("started line without the proxy's address: %v", p.started)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path string, header map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("GET", "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	alice := map[string]string{"X-User-Id": "alice"}
	for i, wantRemaining := range []string{"1", "0"} {
		resp, body := get("/api/items", alice)
		if resp.StatusCode != 200 || body != "hello from /api/items" || resp.Header.Get("X-Upstream") != "yes" {
			t.Fatalf("request %d: got %d %q, want the upstream's 200", i+1, resp.StatusCode, body)
		}
		if got := resp.Header.Get("X-RateLimit-Remaining"); got != wantRemaining || resp.Header.Get("RateLimit-Policy") != `"per-user";q=2;w=60` {
			t.Errorf("request %d: X-RateLimit-Remaining %q RateLimit-Policy %q, want %q and the policy", i+1, got, resp.Header.Get("RateLimit-Policy"), wantRemaining)
		}
	}
	if got, _ := forwarded.Load().(string); got != "127.0.0.1" {
		t.Errorf("upstream saw X-Forwarded-For %q, want 127.0.0.1", got)
	}
	before := served.Load()
	resp, body := get("/api/items", alice)
	var rej struct {
		Error      string `json:"error"`
		Message    string `json:"message"`
		RetryAfter int64  `json:"retry_after"`
	}
	if err := json.Unmarshal([]byte(body), &rej); err != nil || resp.StatusCode != 429 || rej.Error != "RATE_LIMIT_EXCEEDED" || rej.RetryAfter < 1 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third request: got %d %q (%v) Retry-After %q, want 429 with the JSON body", resp.StatusCode, body, err, resp.Header.Get("Retry-After"))
	}
	if served.Load() != before {
		t.Error("a rejected request reached the upstream")
	}
	// Another user, and a path no rule matches, pass.
	if resp, _ := get("/api/items", map[string]string{"X-User-Id": "bob"}); resp.StatusCode != 200 {
		t.Errorf("bob: got %d, want 200", resp.StatusCode)
	}
	if resp, _ := get("/static/logo.png", alice); resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Limit") != "" {
		t.Errorf("unmatched path: got %d with X-RateLimit-Limit %q, want 200 without", resp.StatusCode, resp.Header.Get("X-RateLimit-Limit"))
	}
	if resp, body := get("/api/items", map[string]string{"X-User-Id": strings.Repeat("u", 2000)}); resp.StatusCode != 400 || !strings.Contains(body, "INVALID_REQUEST") {
		t.Errorf("oversized header: got %d %q, want 400", resp.StatusCode, body)
	}
	up.Close()
	// Every request fails; the log says so once, not once per request.
	for i := range 20 {
		if resp, body := get("/api/items", map[string]string{"X-User-Id": fmt.Sprintf("carol-%d", i)}); resp.StatusCode != 502 || !strings.Contains(body, "BAD_GATEWAY") {
			t.Fatalf("upstream gone, request %d: got %d %q, want 502", i, resp.StatusCode, body)
		}
	}
	if got := len(p.logs("proxy: upstream failed")); got != 1 {
		t.Errorf("%d log lines of the upstream's failures, want 1 (at most one per 10 s)", got)
	}
}

// TestReverseProxyBadFlags: a misconfigured proxy is refused at start,
// with the reason.
func TestReverseProxyBadFlags(t *testing.T) {
	skipShort(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, rules, proxyYAML)
	base := []string{"--rules", rules, "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--proxy-upstream", "ftp://example.test"}, "want an http:// or https:// URL"},
		{[]string{"--proxy-upstream", "http://"}, "want an http:// or https:// URL"},
		{[]string{"--proxy-upstream", "http://127.0.0.1:1", "--proxy-headers", "X-User-Id"}, "is not Header=attribute"},
		{[]string{"--proxy-upstream", "http://127.0.0.1:1", "--proxy-headers", "X-Real-Ip=ip"}, `sets "ip" itself`},
		{[]string{"--proxy-upstream", "http://127.0.0.1:1", "--proxy-trusted", "10.0.0.0/33"}, "--proxy-trusted"},
		{[]string{"--proxy-upstream", "http://127.0.0.1:1", "--proxy-on-error", "maybe"}, "want allow or reject"},
	} {
		cmd := exec.Command(limiterBin, append(base, tc.args...)...)
		cmd.Env = os.Environ()
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("%v: still running after 10 s, want it refused", tc.args)
		}
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: got %v %q, want a failure naming %q", tc.args, err, out, tc.want)
		}
	}
}
