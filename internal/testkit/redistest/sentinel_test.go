package redistest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/platform/redisproc"
	"github.com/weirhq/weir/internal/testkit/certtest"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/wait"
)

// TestStartSentinel checks the kit against Redis itself, without
// passwords, with them, with TLS too, and with ACL users and three
// Sentinels: the servers' clients (Server.Client) get in, a client
// without the password or without TLS does not, each ACL user logs in
// where it was given, the replica copies the primary's writes
// (masterauth, tls-replication), and the Sentinels know each other and
// the primary, and have found the replica through it (sentinel
// auth-pass, tls-replication).
func TestStartSentinel(t *testing.T) {
	cert := certtest.Issue(t, t.TempDir(), "redis")
	passwords := redisproc.SentinelConfig{Password: "primary secret", SentinelPassword: `sentinel "secret"`}
	withTLS := passwords
	withTLS.TLS = redisproc.TLSFiles{CertFile: cert.CertFile, KeyFile: cert.KeyFile, CAFile: cert.CertFile}
	users := passwords
	users.Sentinels = 3
	users.Users = []string{"app on >app-pw ~* +@all"}
	users.SentinelUsers = []string{"watcher on >watcher-pw +@all"}
	for _, tc := range []struct {
		name string
		cfg  redisproc.SentinelConfig
	}{
		{"without passwords", redisproc.SentinelConfig{}},
		{"with passwords", passwords},
		{"with passwords and TLS", withTLS},
		{"with ACL users and three Sentinels", users},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.StartSentinel(t, tc.cfg)
			ctx := t.Context()
			if got, want := len(s.Sentinels), max(1, tc.cfg.Sentinels); got != want {
				t.Fatalf("Sentinels: got %d, want %d, the first as Sentinel", got, want)
			}
			for _, g := range []struct {
				users   []string
				servers []*redistest.Server
			}{
				{tc.cfg.Users, []*redistest.Server{s.Primary, s.Replica}},
				{tc.cfg.SentinelUsers, s.Sentinels},
			} {
				for _, u := range g.users {
					f := strings.Fields(u)
					for _, srv := range g.servers {
						c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: f[0], Password: strings.TrimPrefix(f[2], ">"), TLSConfig: srv.TLS})
						err := c.Ping(ctx).Err()
						_ = c.Close()
						if err != nil {
							t.Errorf("PING %s as ACL user %s: %v", srv.Addr, f[0], err)
						}
					}
				}
			}
			for _, srv := range append([]*redistest.Server{s.Primary, s.Replica}, s.Sentinels...) {
				if err := srv.Client(t).Ping(ctx).Err(); err != nil {
					t.Fatalf("PING %s with its password: %v", srv.Addr, err)
				}
				for _, anonymous := range []struct {
					what        string
					opt         redis.Options
					wantRefused bool
				}{
					{"without a password", redis.Options{Addr: srv.Addr, TLSConfig: srv.TLS}, srv.Password != ""},
					{"over plain TCP", redis.Options{Addr: srv.Addr, Password: srv.Password, MaxRetries: -1}, srv.TLS != nil},
				} {
					c := redis.NewClient(&anonymous.opt)
					err := c.Ping(ctx).Err()
					_ = c.Close()
					if (err != nil) != anonymous.wantRefused {
						t.Errorf("PING %s %s: got error %v, want one: %v", srv.Addr, anonymous.what, err, anonymous.wantRefused)
					}
				}
			}
			if err := s.Primary.Client(t).Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			replica := s.Replica.Client(t)
			// Redis's first sync waits repl-diskless-sync-delay, 5 s by
			// default.
			wait.For(t, 15*time.Second, "the primary's write on the replica", func() bool {
				return replica.Get(ctx, "k").Val() == "v"
			})

			for _, srv := range s.Sentinels {
				sentinel := redis.NewSentinelClient(&redis.Options{Addr: srv.Addr, Password: srv.Password, TLSConfig: srv.TLS})
				t.Cleanup(func() { _ = sentinel.Close() })
				addr, err := sentinel.GetMasterAddrByName(ctx, s.MasterName).Result()
				if err != nil || strings.Join(addr, ":") != s.Primary.Addr {
					t.Fatalf("SENTINEL GET-MASTER-ADDR-BY-NAME of %s: got %v %v, want %s", srv.Addr, addr, err, s.Primary.Addr)
				}
				if others, err := sentinel.Sentinels(ctx, s.MasterName).Result(); err != nil || len(others) != len(s.Sentinels)-1 {
					t.Errorf("SENTINEL SENTINELS of %s: got %d %v, want %d", srv.Addr, len(others), err, len(s.Sentinels)-1)
				}
				wait.For(t, 15*time.Second, "the replica among the Sentinel's", func() bool {
					replicas, err := sentinel.Replicas(ctx, s.MasterName).Result()
					if err != nil && !errors.Is(err, redis.Nil) {
						t.Fatalf("SENTINEL REPLICAS of %s: %v", srv.Addr, err)
					}
					for _, r := range replicas {
						if strings.Contains(r["flags"], "slave") && !strings.Contains(r["flags"], "disconnected") && r["ip"]+":"+r["port"] == s.Replica.Addr {
							return true
						}
					}
					return false
				})
			}
		})
	}
}

// TestSentinelFailover checks Sentinel.Failover against Redis itself:
// once it returns, the Sentinel names the replica as the primary within
// seconds, and the replica, a primary now, holds what the old primary
// was written before.
func TestSentinelFailover(t *testing.T) {
	s := redistest.StartSentinel(t, redisproc.SentinelConfig{})
	ctx := t.Context()
	if err := s.Primary.Client(t).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.Failover(t)
	sentinel := s.Sentinels[0].SentinelClient(t)
	wait.For(t, 15*time.Second, "the Sentinel to name the replica", func() bool {
		addr, err := sentinel.GetMasterAddrByName(ctx, s.MasterName).Result()
		return err == nil && strings.Join(addr, ":") == s.Replica.Addr
	})
	t.Logf("the Sentinel names the replica %v after SENTINEL FAILOVER was asked", time.Since(start).Round(10*time.Millisecond))
	replica := s.Replica.Client(t)
	if r, err := replica.Do(ctx, "role").Slice(); err != nil || len(r) == 0 || r[0] != "master" {
		t.Errorf("ROLE of the replica: got %v %v, want master", r, err)
	}
	if got, err := replica.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("k on the promoted replica: got %q %v, want v", got, err)
	}
}
