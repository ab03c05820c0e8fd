package limiterd_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/etcd/rulestore"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/pkg/rule"
)

// putPerUserRule writes, as the admin API does, a local rule api/per-user
// admitting 2 requests per user in 5 minutes.
func putPerUserRule(ctx context.Context, t *testing.T, cli *clientv3.Client) {
	t.Helper()
	r := rule.Rule{Domain: "api", ID: "per-user", KeyType: rule.Dimensions{"user_id"}, Limit: 2, WindowSeconds: 300, Scope: rule.ScopeLocal}
	r.SetDefaults()
	r.Enabled = true
	doc, err := rulestore.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Txn(ctx).Then(rulestore.PutOps(etcdlayout.Layout{}, "api", "per-user", doc)...).Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestNewLimiterEnforcesLastValidRule corrupts a rule's document in etcd
// by hand, then starts a limiter: it enforces the rule's last valid
// version (a request over its limit is rejected) and reports the
// corruption on /readyz and /metrics.
func TestNewLimiterEnforcesLastValidRule(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	var layout etcdlayout.Layout
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// As the admin API writes it, then corrupted by hand.
	putPerUserRule(ctx, t, cli)
	if _, err := cli.Put(ctx, layout.Rule("api", "per-user"), `{"rule_id":"per-user","limit":"two"}`); err != nil {
		t.Fatal(err)
	}

	base := startLimiter(t, limiterd.Config{DC: "a", Etcd: etcd.Endpoints()})
	get := func(method, path, body string) (int, []byte) {
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
		return resp.StatusCode, b
	}
	for i, want := range []bool{true, true, false} {
		allowed, matched := check(ctx, t, base, `{"domain":"api","attributes":{"user_id":"u"}}`)
		if allowed != want || !matched {
			t.Errorf("check %d: got allowed=%v matched=%v, want allowed=%v under the last valid rule (limit 2)", i+1, allowed, matched, want)
		}
	}

	code, b := get("GET", "/readyz", "")
	var ready struct {
		Status   string   `json:"status"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal(b, &ready); err != nil || code != http.StatusOK {
		t.Fatalf("readyz: %d %s", code, b)
	}
	if len(ready.Warnings) != 1 || !strings.Contains(ready.Warnings[0], "per-user") || !strings.Contains(ready.Warnings[0], "last valid version") {
		t.Errorf("readyz warnings: got %q, want per-user held at its last valid version", ready.Warnings)
	}
	_, b = get("GET", "/metrics", "")
	for _, want := range []string{"weir_rules_held_last_valid 1", `weir_etcd_documents_skipped_total{kind="rule"} 1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics: want %q", want)
		}
	}
}
