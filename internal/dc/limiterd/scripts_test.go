package limiterd_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/wait"
)

// A limiter started while Redis is down checks the server and loads its
// scripts once Redis answers, without waiting for a decision to need
// them: Redis ends up holding the scripts a limiter that found it at
// start loads (the check's included), and no decision was made.
func TestScriptsLoadedWhenRedisComesUp(t *testing.T) {
	rules := writeRules(t)
	ctx := context.Background()
	cachedScripts := func(t *testing.T, c *redis.Client) int {
		t.Helper()
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "number_of_cached_scripts:"); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("number_of_cached_scripts: %v", err)
				}
				return n
			}
		}
		t.Fatalf("INFO memory has no number_of_cached_scripts: %q", info)
		return 0
	}

	up := redistest.Start(t)
	startLimiter(t, limiterd.Config{DC: "a", Redis: up.Addr, RulesFile: rules})
	want := cachedScripts(t, up.Client(t))
	if want < 2 {
		t.Fatalf("a limiter that found Redis at start left %d scripts in it, want the check and the algorithms'", want)
	}

	down := redistest.Start(t)
	down.Stop()
	startLimiter(t, limiterd.Config{DC: "a", Redis: down.Addr, RulesFile: rules})
	down.Restart(t)
	c := down.Client(t)
	wait.For(t, 30*time.Second, "the scripts loaded into a Redis that came up after the limiter", func() bool {
		return cachedScripts(t, c) == want
	})
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("keys in Redis: %d %v, want none (no decision was made)", n, err)
	}
}
