package limiterd

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/syncbuf"
	"github.com/weirhq/weir/internal/testkit/wait"
)

// TestClusterSeedCheckedLater: one node named in --redis that does not
// answer at start gets a client of its own and a later check; when the
// node answers as one of a Redis Cluster's several primaries, an error
// says that the limiter uses it alone and must be restarted. A node that
// answers at start, or a Redis without cluster mode, gets no such line.
func TestClusterSeedCheckedLater(t *testing.T) {
	const seedError = "--redis names one node of a Redis Cluster, which did not answer at start"
	cluster := redistest.StartCluster(t)
	for _, tc := range []struct {
		name string
		// node starts the server the client is of, and returns its
		// address and a function that makes it answer (nil: it
		// answers from the start).
		node      func(t *testing.T) (addr string, answer func())
		later     bool // a later check is returned
		wantError bool
	}{
		{"cluster node down at start", func(t *testing.T) (string, func()) {
			addr := cluster.Addrs()[0]
			node := cluster.Node(addr)
			if err := node.Pause(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = node.Resume() })
			return addr, func() {
				if err := node.Resume(); err != nil {
					t.Fatal(err)
				}
			}
		}, true, true},
		{"Redis down at start", func(t *testing.T) (string, func()) {
			srv := redistest.Start(t)
			if err := srv.Pause(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = srv.Resume() })
			return srv.Addr, func() {
				if err := srv.Resume(); err != nil {
					t.Fatal(err)
				}
			}
		}, true, false},
		{"Redis up at start", func(t *testing.T) (string, func()) { return redistest.Start(t).Addr, nil }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, answer := tc.node(t)
			var logs syncbuf.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			oc, err := redisClient(addr, nil, 200*time.Millisecond, log)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = oc.close() })
			if got := oc.later != nil; got != tc.later {
				t.Fatalf("a later check: %v, want %v", got, tc.later)
			}
			if !tc.later {
				return
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { oc.later(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			answer()
			wait.For(t, 30*time.Second, "the later check to end once the node answers", func() bool {
				select {
				case <-done:
					return true
				default:
					return false
				}
			})
			if got := strings.Contains(logs.String(), seedError); got != tc.wantError {
				t.Errorf("error %q logged: %v, want %v; logs:\n%s", seedError, got, tc.wantError, logs.String())
			}
		})
	}
}
