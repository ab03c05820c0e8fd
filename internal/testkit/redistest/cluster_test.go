package redistest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/platform/redisproc"
	"github.com/weirhq/weir/internal/testkit/certtest"
	"github.com/weirhq/weir/internal/testkit/redistest"
)

// TestCluster checks the kit against Redis itself: the slot of a key, a
// slot migration with its key, and a primary's failover, whose duration it
// logs (docs/operations.md quotes it).
func TestCluster(t *testing.T) {
	checkCluster(t, redistest.StartCluster(t))
}

// TestClusterTLS is TestCluster on a cluster whose nodes serve TLS alone,
// to clients, on the cluster bus and to their replicas; its nodes refuse
// a plain TCP client.
func TestClusterTLS(t *testing.T) {
	cert := certtest.Issue(t, t.TempDir(), "redis")
	c := redistest.StartClusterTLS(t, redisproc.TLSFiles{CertFile: cert.CertFile, KeyFile: cert.KeyFile, CAFile: cert.CertFile})
	for _, s := range c.Nodes {
		plain := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		err := plain.Ping(t.Context()).Err()
		_ = plain.Close()
		if err == nil {
			t.Errorf("plain TCP PING of %s: got no error, want one", s.Addr)
		}
	}
	checkCluster(t, c)
}

// TestClusterPassword is TestCluster on a cluster whose nodes require a
// password, of clients and of each other, and have an ACL user
// (ClusterConfig.Users): its nodes refuse a client without the password,
// and let the user in.
func TestClusterPassword(t *testing.T) {
	c := redistest.StartClusterWith(t, redisproc.ClusterConfig{Password: "cluster-secret", Users: []string{"app on >app-pw ~* +@all"}})
	for _, s := range c.Nodes {
		anon := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		err := anon.Set(t.Context(), "{x}", "1", 0).Err()
		_ = anon.Close()
		if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			t.Errorf("SET without the password on %s: got %v, want NOAUTH", s.Addr, err)
		}
		app := redis.NewClient(&redis.Options{Addr: s.Addr, Username: "app", Password: "app-pw", MaxRetries: -1})
		user, err := app.Do(t.Context(), "acl", "whoami").Text()
		_ = app.Close()
		if err != nil || user != "app" {
			t.Errorf("ACL WHOAMI on %s as app: got %q %v, want app", s.Addr, user, err)
		}
	}
	checkCluster(t, c)
}

// checkCluster checks the kit on c: the slot of a key, a slot migration
// with its key, and a primary's failover, whose duration it logs.
func checkCluster(t *testing.T, c *redistest.Cluster) {
	rc := c.Client(t)
	ctx := context.Background()

	for _, key := range []string{"", "a", "weir:{rule/user}:fw", "{}x", "x{}{y}", "abc{def}ghi", "k%7B"} {
		want, err := rc.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := redistest.Slot(key); int64(got) != want {
			t.Errorf("Slot(%q): got %d, want %d (CLUSTER KEYSLOT)", key, got, want)
		}
	}

	primaries, err := c.Primaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(primaries) != 3 {
		t.Fatalf("got primaries %v, want 3", primaries)
	}

	t.Run("migrate", func(t *testing.T) {
		key := "{m}"
		slot := redistest.Slot(key)
		if err := rc.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		from, err := c.PrimaryOf(ctx, slot)
		if err != nil {
			t.Fatal(err)
		}
		to := primaries[0]
		if to == from {
			to = primaries[1]
		}
		if err := c.MigrateSlot(ctx, slot, to); err != nil {
			t.Fatal(err)
		}
		if got, _ := c.PrimaryOf(ctx, slot); got != to {
			t.Errorf("slot %d after migration: got primary %s, want %s", slot, got, to)
		}
		if got, err := rc.Get(ctx, key).Result(); err != nil || got != "v" {
			t.Errorf("key after migration: got %q %v, want v", got, err)
		}
	})

	t.Run("failover", func(t *testing.T) {
		slot := redistest.Slot("{f}")
		start := time.Now()
		dead := c.KillPrimaryOf(t, slot)
		promoted := c.WaitPromoted(t, slot, dead)
		t.Logf("primary %s killed, replica %s promoted after %v (cluster-node-timeout %v)", dead, promoted, time.Since(start).Round(10*time.Millisecond), redistest.NodeTimeout)
		if promoted == dead {
			t.Fatalf("got primary %s, want another", promoted)
		}
		// A new client reads the new slot map (rc's is stale until its
		// next reload).
		if err := c.Client(t).Set(ctx, "{f}", "v", 0).Err(); err != nil {
			t.Errorf("write to the promoted replica: %v", err)
		}
	})
}
