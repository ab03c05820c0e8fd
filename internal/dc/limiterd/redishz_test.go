package limiterd

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/wait"
)

// A Redis node below hz 100 is named in an info line; one at 100, or one
// that does not answer, gives no line at info. The pause is a quarter of
// 1/hz, at Redis's default hz of 10 for a node that does not answer.
func TestExpiryPause(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(t *testing.T) *redis.Client
		advice bool
		pause  time.Duration
	}{
		{"default hz", func(t *testing.T) *redis.Client { return redistest.Start(t).Client(t) }, true, 25 * time.Millisecond},
		{"hz 100", func(t *testing.T) *redis.Client { return redistest.Start(t, "--hz", "100").Client(t) }, false, 2500 * time.Microsecond},
		{"hz 40", func(t *testing.T) *redis.Client { return redistest.Start(t, "--hz", "40").Client(t) }, true, 6250 * time.Microsecond},
		{"no answer", func(t *testing.T) *redis.Client {
			c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}, false, 25 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if got, _ := expiryPause(ctx, tc.client(t), log); got != tc.pause {
				t.Errorf("pause %v, want %v", got, tc.pause)
			}
			switch got := out.String(); {
			case tc.advice && !strings.Contains(got, "low hz"):
				t.Fatalf("no advice for a low hz; log: %q", got)
			case !tc.advice && got != "":
				t.Fatalf("logged at info: %q, want nothing", got)
			}
		})
	}
}

// On Redis Cluster every node is read, replicas too (a failover makes one
// a primary): three primaries and three replicas at the default hz give
// six lines, one a node.
func TestExpiryPauseCluster(t *testing.T) {
	redistest.RequireCluster(t)
	clu := redistest.StartCluster(t)
	cl := clu.Client(t)
	// A new cluster's replicas join, and then answer, a little after it
	// starts: advise until every node is named (with primaries only, it
	// never is).
	var out bytes.Buffer
	wait.For(t, 30*time.Second, "advice for the six nodes", func() bool {
		out.Reset()
		log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if got, _ := expiryPause(ctx, cl, log); got != 25*time.Millisecond {
			t.Errorf("pause %v, want 25ms", got)
		}
		nodes := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if _, rest, ok := strings.Cut(line, "node="); ok && strings.Contains(line, "hz=10 ") {
				nodes[strings.Fields(rest)[0]] = true
			}
		}
		return len(nodes) == 6
	})
	// The lowest hz counts: every node at 100 but one primary at 40 (a
	// primary, which every node's CLUSTER SLOTS lists; a replica that the
	// answering node holds to have failed is left out).
	ctx := context.Background()
	primaries, err := clu.Primaries(ctx)
	if err != nil || len(primaries) == 0 {
		t.Fatalf("primaries: %v %v", primaries, err)
	}
	for _, addr := range clu.Addrs() {
		hz := "100"
		if addr == primaries[0] {
			hz = "40"
		}
		n := redis.NewClient(&redis.Options{Addr: addr})
		err := n.ConfigSet(ctx, "hz", hz).Err()
		_ = n.Close()
		if err != nil {
			t.Fatalf("CONFIG SET hz %s on %s: %v", hz, addr, err)
		}
	}
	if got, _ := expiryPause(ctx, cl, slog.New(slog.DiscardHandler)); got != 6250*time.Microsecond {
		t.Errorf("one primary at hz 40, the other nodes at 100: pause %v, want 6.25ms", got)
	}
}

// The store's pause is Redis's, read from its hz, unless --store-pause
// sets it (0 included); the memory store has none.
func TestOpenStorePause(t *testing.T) {
	addr := redistest.Start(t).Addr
	pause := func(d time.Duration) *time.Duration { return &d }
	for _, tc := range []struct {
		name  string
		cfg   Config
		pause time.Duration
	}{
		{"Redis at its default hz", Config{Redis: addr}, 25 * time.Millisecond},
		{"--store-pause 0", Config{Redis: addr, StorePause: pause(0)}, 0},
		{"--store-pause 7ms", Config{Redis: addr, StorePause: pause(7 * time.Millisecond)}, 7 * time.Millisecond},
		{"memory store", Config{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Logger = slog.New(slog.DiscardHandler)
			st, err := openStore(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer st.release()
			if got := st.pause; got != tc.pause {
				t.Errorf("pause %v, want %v", got, tc.pause)
			}
		})
	}
}

// A Redis Cluster client follows a pipeline's redirects at once: go-redis
// reads a MinRetryBackoff of -1 as none, where its default sleeps 10 to
// 30 ms before re-sending what a migrating slot's node redirected.
func TestTuneClusterRedirectsWithoutBackoff(t *testing.T) {
	opt := &redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}
	tuneCluster(opt, 200*time.Millisecond)
	c := redis.NewClusterClient(opt)
	defer c.Close()
	if got := c.Options().MinRetryBackoff; got != 0 {
		t.Errorf("MinRetryBackoff as go-redis reads it: %v, want 0 (no backoff)", got)
	}
	if got := c.Options().MaxRetries; got != -1 {
		t.Errorf("MaxRetries: %d, want -1 (none)", got)
	}
}
