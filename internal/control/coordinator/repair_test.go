package coordinator

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/etcd/rulestore"
	"github.com/weirhq/weir/internal/testkit/wait"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestLeaderRepairsForeignDocuments has documents under the quotas prefix
// corrupted, deleted or written by someone else while a leader runs with
// no change of plan: each is rewritten, by the leader, as a valid document
// of its own.
func TestLeaderRepairsForeignDocuments(t *testing.T) {
	garbage := "\xff\xff not protobuf"
	tests := []struct {
		name   string
		key    func(h *harness) string
		change func(ctx context.Context, h *harness, key string) error
		valid  func(b []byte) bool
	}{
		{
			name: "assignment corrupted",
			key:  func(h *harness) string { return h.layout.Assignment("a", "api", "r") },
			change: func(ctx context.Context, h *harness, key string) error {
				_, err := h.cli.Put(ctx, key, garbage)
				return err
			},
			valid: isAssignment("a"),
		},
		{
			name: "assignment deleted",
			key:  func(h *harness) string { return h.layout.Assignment("a", "api", "r") },
			change: func(ctx context.Context, h *harness, key string) error {
				_, err := h.cli.Delete(ctx, key)
				return err
			},
			valid: isAssignment("a"),
		},
		{
			name: "assignment the leader never wrote",
			key:  func(h *harness) string { return h.layout.Assignment("b", "api", "r") },
			change: func(ctx context.Context, h *harness, key string) error {
				_, err := h.cli.Put(ctx, key, garbage)
				return err
			},
			valid: isAssignment("b"),
		},
		{
			name: "lease corrupted",
			key:  func(h *harness) string { return h.layout.Lease("c") },
			change: func(ctx context.Context, h *harness, key string) error {
				_, err := h.cli.Put(ctx, key, "\x0a\x01")
				return err
			},
			valid: func(b []byte) bool {
				var l weirv1.AssignmentLease
				return proto.Unmarshal(b, &l) == nil && l.GetDc() == "c" && l.GetValidUntilMs() > 0
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// What a former leader left: DC a's document of the rule at
			// its static share, and DC c's lease, run out. Nobody reports,
			// so the plan does not change, no lease is renewed, and
			// nothing is rewritten for its own sake.
			doc, err := proto.Marshal(&weirv1.RuleAssignment{Dc: "a", Domain: "api", RuleId: "r", Share: 1.0 / 3, Epoch: 1})
			if err != nil {
				t.Fatal(err)
			}
			lease, err := proto.Marshal(&weirv1.AssignmentLease{Dc: "c", Epoch: 1, ValidUntilMs: time.Now().Add(-time.Minute).UnixMilli(), TtlMs: 2000, Leader: "c0"})
			if err != nil {
				t.Fatal(err)
			}
			for key, value := range map[string][]byte{h.layout.Assignment("a", "api", "r"): doc, h.layout.Lease("c"): lease} {
				if _, err := h.cli.Put(ctx, key, string(value)); err != nil {
					t.Fatal(err)
				}
			}
			c1 := h.start("c1")
			wait.For(t, 5*time.Second, "c1 leads", c1.c.Leader)

			key := tt.key(h)
			if err := tt.change(ctx, h, key); err != nil {
				t.Fatal(err)
			}
			took := wait.For(t, 5*time.Second, "the document rewritten and the repair counted", func() bool {
				resp, err := h.cli.Get(ctx, key)
				return err == nil && len(resp.Kvs) == 1 && tt.valid(resp.Kvs[0].Value) && c1.c.stats.repairs.Load() > 0
			})
			t.Logf("rewritten in %v (interval 200ms)", took)
		})
	}
}

func isAssignment(dc string) func(b []byte) bool {
	return func(b []byte) bool {
		var d weirv1.RuleAssignment
		return proto.Unmarshal(b, &d) == nil && checkDoc(&d, dc, "api", "r") == nil
	}
}

// TestLeaderRestoresRuleShadow corrupts a rule's document (300,000 bytes
// of junk) and its shadow while two coordinators, each with its own
// mirroring rule watcher, hold the rule's last valid version in memory:
// the leader, and only the leader, puts that version back as the shadow,
// and counts it; a rule watcher started afterwards, as a new limiter's
// is, then enforces it.
func TestLeaderRestoresRuleShadow(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := rule.Rule{Domain: "api", ID: "tenant-daily", Limit: 5, WindowSeconds: 86400, Enabled: true}
	r.SetDefaults()
	doc, err := rulestore.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.cli.Txn(ctx).Then(rulestore.PutOps(h.layout, "api", "tenant-daily", doc)...).Commit(); err != nil {
		t.Fatal(err)
	}
	watch := func(mirror bool) (*rulestore.Watcher, func() (rule.Rule, bool)) {
		var mu sync.Mutex
		var inForce []rule.Set
		w, err := rulestore.New(rulestore.Config{Client: h.etcd.Client(t), Layout: h.layout, Mirror: mirror, Logger: slog.New(slog.DiscardHandler),
			Apply: func(_ int64, sets []rule.Set) error { mu.Lock(); inForce = sets; mu.Unlock(); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		wctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = w.Run(wctx) }()
		t.Cleanup(func() { stop(); <-done })
		if err := w.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
		return w, func() (rule.Rule, bool) {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range inForce {
				for _, x := range s.Rules {
					if s.Domain == "api" && x.ID == "tenant-daily" {
						return x, true
					}
				}
			}
			return rule.Rule{}, false
		}
	}
	w1, _ := watch(true)
	w2, _ := watch(true)
	c1 := h.startWith("c1", func(cfg *Config) { cfg.Shadows = w1 })
	wait.For(t, 5*time.Second, "c1 leads", c1.c.Leader)
	c2 := h.startWith("c2", func(cfg *Config) { cfg.Shadows = w2 })

	if _, err := h.cli.Txn(ctx).Then(
		clientv3.OpPut(h.layout.Rule("api", "tenant-daily"), strings.Repeat("j", 300_000)),
		clientv3.OpPut(h.layout.ValidRule("api", "tenant-daily"), "garbage"),
	).Commit(); err != nil {
		t.Fatal(err)
	}
	took := wait.For(t, 5*time.Second, "the shadow restored and counted", func() bool {
		resp, err := h.cli.Get(ctx, h.layout.ValidRule("api", "tenant-daily"))
		if err != nil || len(resp.Kvs) != 1 {
			return false
		}
		got, err := rulestore.Decode("api", "tenant-daily", resp.Kvs[0].Value)
		return err == nil && got.Limit == 5 && c1.c.stats.shadowRepairs.Load() == 1
	})
	t.Logf("restored in %v (interval 200ms)", took)
	if n, m := c2.c.stats.shadowRepairs.Load(), w2.Stats().Mended; n != 0 || m != 0 {
		t.Errorf("the standby mended %d shadows (its watcher %d), want 0", n, m)
	}

	_, inForce := watch(false)
	wait.For(t, 5*time.Second, "a watcher started afterwards enforcing the rule", func() bool {
		x, ok := inForce()
		return ok && x.Limit == 5
	})
}
