package limiterd_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
)

// TestEtcdRulesDeletedToNone follows a limiter whose rules live in etcd
// as the last rule is deleted: the check API keeps answering 200,
// allowed with no rule matched, /readyz says the rules are empty, and an
// invalid document is counted in weir_etcd_documents_skipped_total.
func TestEtcdRulesDeletedToNone(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	layout := etcdlayout.Layout{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, layout.Rule("api", "per-user"), `{"rule_id":"per-user","key_type":"user_id","limit":5,"window_seconds":60}`); err != nil {
		t.Fatal(err)
	}

	addrs := make(chan string, 1)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- limiterd.Run(runCtx, limiterd.Config{
			DC: "a", Etcd: etcd.Endpoints(), HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0",
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Ready:  func(httpAddr, _ string) { addrs <- "http://" + httpAddr },
		})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("limiterd: %v", err)
		}
	})
	var base string
	select {
	case base = <-addrs:
	case err := <-done:
		t.Fatalf("limiterd stopped: %v", err)
	}

	type answer struct {
		code    int
		Allowed bool   `json:"allowed"`
		Matched bool   `json:"matched"`
		Rules   string `json:"rules"`
	}
	get := func(method, path, body string) answer {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		a := answer{code: resp.StatusCode}
		_ = json.Unmarshal(b, &a)
		return a
	}
	// waitFor polls until cond holds: rule changes reach the limiter
	// through its etcd watch.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("%s: not before the deadline", what)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	checks := []string{`{"domain":"api","attributes":{"user_id":"u"}}`, `{"attributes":{"user_id":"u"}}`}

	waitFor("the rule is in force", func() bool { a := get("POST", "/v1/check", checks[0]); return a.code == 200 && a.Matched })
	if _, err := cli.Delete(ctx, layout.Rule("api", "per-user")); err != nil {
		t.Fatal(err)
	}
	waitFor("the rule is gone", func() bool { return get("GET", "/readyz", "").Rules == "empty" })
	for _, body := range checks {
		if a := get("POST", "/v1/check", body); a.code != http.StatusOK || !a.Allowed || a.Matched {
			t.Errorf("check %s after the last rule was deleted: got %d allowed=%v matched=%v, want 200 allowed, matched false", body, a.code, a.Allowed, a.Matched)
		}
	}
	if a := get("GET", "/readyz", ""); a.code != http.StatusOK {
		t.Errorf("readyz with no rule: got %d, want 200", a.code)
	}

	if _, err := cli.Put(ctx, layout.Rule("api", "bad"), `{"rule_id":`); err != nil {
		t.Fatal(err)
	}
	waitFor("the invalid document is counted", func() bool {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `weir_etcd_documents_skipped_total{kind="rule"} 1`) &&
			strings.Contains(string(b), `weir_memstore_evictions_total{store="local"} 0`)
	})
}
