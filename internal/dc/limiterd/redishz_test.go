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
)

// A Redis node below hz 100 is named in an info line; one at 100, or one
// that does not answer, is not.
func TestAdviseHz(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(t *testing.T) *redis.Client
		advice bool
	}{
		{"default hz", func(t *testing.T) *redis.Client { return redistest.Start(t).Client(t) }, true},
		{"hz 100", func(t *testing.T) *redis.Client { return redistest.Start(t, "--hz", "100").Client(t) }, false},
		{"no answer", func(t *testing.T) *redis.Client {
			c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			adviseHz(ctx, tc.client(t), log)
			if got := strings.Contains(out.String(), "hz=10 "); got != tc.advice {
				t.Fatalf("advice logged: %v, want %v; log: %q", got, tc.advice, out.String())
			}
		})
	}
}
