package limiterd_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/syncbuf"
)

// TestRedisAddresses starts a limiter on one Redis named each way --redis
// can name it — host:port, a redis:// URL, a Unix socket (envoyproxy/
// ratelimit's REDIS_SOCKET_TYPE=unix), and, once the server requires a
// password (REDIS_AUTH), URLs carrying it — and checks that every
// decision is made on the store, and its key is in Redis. A wrong or
// missing password decides every check by the failure mode, and the
// log says the password was refused.
func TestRedisAddresses(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "redis.sock")
	srv := redistest.Start(t, "--unixsocket", sock, "--unixsocketperm", "700")
	const password = "s3cret:/@?&"
	escaped := "s3cret%3A%2F%40%3F%26"
	// Every check is decided by each of the five algorithms, each with
	// its own script and commands.
	var yaml strings.Builder
	yaml.WriteString("domain: api\nrules:\n")
	for _, alg := range algorithms {
		burst := "" // a leaky bucket's is 1 by default
		if strings.HasSuffix(alg, "Bucket") {
			burst = ", burst: 100"
		}
		fmt.Fprintf(&yaml, "  - {rule_id: %s, key_type: user_id, limit: 1000, window_seconds: 60, algorithm: %s%s}\n", alg, alg, burst)
	}
	rules := ruleFile(t, yaml.String())
	const checks = 4
	decisions := checks * len(algorithms)
	for _, tc := range []struct {
		name, redis string
		password    bool   // the server requires the password
		wantStore   bool   // every decision on the store, else by the failure mode
		wantLog     string // a line the log must hold
	}{
		{"host:port", srv.Addr, false, true, ""},
		{"redis:// URL", "redis://" + srv.Addr, false, true, ""},
		{"Unix socket", "unix://" + sock, false, true, ""},
		{"password in a redis:// URL", "redis://:" + escaped + "@" + srv.Addr, true, true, ""},
		{"password with a Unix socket", "unix://:" + escaped + "@" + sock, true, true, ""},
		{"wrong password", "redis://:wrong@" + srv.Addr, true, false, "Redis refused the limiter's password or user"},
		{"no password", srv.Addr, true, false, "Redis refused the limiter's password or user"},
		// ACL users (Redis 6): one with the least Weir needs
		// (limiterd.RedisACL, docs/operations.md), one that may only read.
		{"ACL user with Weir's commands", "redis://weir:weir-pw@" + srv.Addr, true, true, ""},
		{"ACL user that may only read", "redis://reader:reader-pw@" + srv.Addr, true, false, "Redis refused the limiter a command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: password})
			defer admin.Close()
			if tc.password {
				// CONFIG SET keeps the connection that sets it logged in.
				if err := srv.Client(t).ConfigSet(t.Context(), "requirepass", password).Err(); err != nil && admin.Ping(t.Context()).Err() != nil {
					t.Fatalf("require the password: %v", err)
				}
			}
			for _, user := range []string{"weir on >weir-pw " + limiterd.RedisACL, "reader on >reader-pw resetkeys ~* -@all +@connection +@read"} {
				if err := admin.Do(t.Context(), append([]any{"ACL", "SETUSER"}, anySlice(strings.Fields(user))...)...).Err(); err != nil && tc.password {
					t.Fatalf("ACL SETUSER %s: %v", user, err)
				}
			}
			var logs syncbuf.Buffer
			base := startLimiter(t, limiterd.Config{DC: "a", Redis: tc.redis, RulesFile: rules, StoreTimeout: time.Second,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			user := fmt.Sprintf("user-%s", tc.name)
			postChecks(t, base, user, checks)
			checkDecided(t, base, admin, user, decisions, tc.wantStore, &logs, tc.wantLog)
		})
	}
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// algorithms names Weir's five algorithms, as rules name them.
var algorithms = []string{"TokenBucket", "LeakyBucket", "FixedWindow", "SlidingWindowLog", "SlidingWindowCounter"}
