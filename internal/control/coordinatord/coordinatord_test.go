package coordinatord

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/etcd/rulestore"
	"github.com/weirhq/weir/internal/kafka/usagetopic"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/internal/testkit/kafkatest"
	"github.com/weirhq/weir/internal/testkit/wait"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestNewCoordinatorPlansLastValidRule corrupts a global rule's document,
// then starts a coordinator: it plans the rule's last valid version. A
// garbage share document of the rule in DC a makes the leader write the
// rule's document there at once (it rewrites what it does not recognise,
// for the rules it plans), so the rule's shares document appears without
// waiting for demand to move the plan.
func TestNewCoordinatorPlansLastValidRule(t *testing.T) {
	etcd := etcdtest.Start(t)
	broker := kafkatest.Start(t, usagetopic.Name)
	cli := etcd.Client(t)
	var layout etcdlayout.Layout
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	putRule(ctx, t, cli, loginRule())
	for key, value := range map[string]string{
		layout.Rule("api", "login"):            `{"rule_id":"login","limit":100,"window_seconds":"soon"}`,
		layout.Assignment("a", "api", "login"): "\xff garbage",
	} {
		if _, err := cli.Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	}

	start(t, Config{
		Etcd: etcd.Endpoints(), Kafka: []string{broker.Addr()}, DCs: []string{"a", "b", "c"},
		AdminAddr: "127.0.0.1:0", Name: "c1", Interval: 200 * time.Millisecond,
	})
	wait.For(t, 10*time.Second, "the rule's shares document in DC a", func() bool {
		resp, err := cli.Get(ctx, layout.Assignment("a", "api", "login"))
		if err != nil || len(resp.Kvs) == 0 {
			return false
		}
		var d weirv1.RuleAssignment
		return proto.Unmarshal(resp.Kvs[0].Value, &d) == nil && d.GetDc() == "a" && d.GetRuleId() == "login"
	})
}

// loginRule is the rule most tests here put in etcd: global, domain api,
// 100 per minute per user_id.
func loginRule() rule.Rule {
	return rule.Rule{Domain: "api", ID: "login", KeyType: rule.Dimensions{"user_id"}, Limit: 100, WindowSeconds: 60, Scope: rule.ScopeGlobal}
}

// token is the admin token of tokenFile.
const token = "0123456789abcdef0123456789abcdef"

// tokenFile writes an admin token file holding token with mode and name
// (e.g. "rw operator") and returns its path.
func tokenFile(t *testing.T, modeAndName string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(token+" "+modeAndName+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// start runs a coordinator with cfg (its Logger discarding, its Ready
// taken) until t ends, and returns its admin address once it serves.
func start(t *testing.T, cfg Config) string {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Ready = func(addr string) { ready <- addr }
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("coordinatord: %v", err)
		}
	})
	select {
	case addr := <-ready:
		return addr
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("coordinatord ended before it served: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("coordinatord did not serve in 30s")
	}
	return ""
}

// putRule stores r, enabled and with its defaults, in etcd as the admin API
// does.
func putRule(ctx context.Context, t *testing.T, cli *clientv3.Client, r rule.Rule) {
	t.Helper()
	r.SetDefaults()
	r.Enabled = true
	doc, err := rulestore.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Txn(ctx).Then(rulestore.PutOps(etcdlayout.Layout{}, r.Domain, r.ID, doc)...).Commit(); err != nil {
		t.Fatal(err)
	}
}
