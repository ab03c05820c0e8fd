package coordinator

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/testkit/wait"
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
