package redistest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/platform/redisproc"
)

// Cluster is a running local Redis Cluster (package redisproc): three
// primaries and three replicas.
type Cluster struct {
	*redisproc.Cluster
}

// NodeTimeout is the cluster-node-timeout of the clusters this package
// starts: a killed primary's replica takes over about 1 to 2 s later.
const NodeTimeout = time.Second

// startTimeout bounds the creation of a cluster.
const startTimeout = 60 * time.Second

// RequireCluster skips t when redis-server or redis-cli is missing, with a
// loud message, unless the tests run as root or under CI=true, where
// `make test` (scripts/ensure-redis.sh) installs them: there it fails.
func RequireCluster(t testing.TB) {
	t.Helper()
	missing := ""
	switch {
	case redisproc.Binary() == "":
		missing = "redis-server"
	case redisproc.CLIBinary() == "":
		missing = "redis-cli"
	default:
		return
	}
	msg := missing + " not found: install it (Debian: apt-get install -y redis-server) or set REDIS_SERVER/REDIS_CLI; Redis Cluster tests are SKIPPED"
	if os.Getenv("CI") == "true" || os.Geteuid() == 0 {
		t.Fatal(msg)
	}
	fmt.Fprintln(os.Stderr, "!!!", msg)
	t.Skip(msg)
}

// StartCluster starts a Redis Cluster of its own for t, stopped when t
// ends. It takes a few seconds: tests that leave the topology as they
// found it share one with SharedCluster instead.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	return StartClusterWith(t, redisproc.ClusterConfig{})
}

// StartClusterTLS is StartCluster for a cluster whose nodes serve TLS
// alone, with files, also on the cluster bus and to their replicas
// (redisproc.ClusterConfig.TLS). Its Client connects over TLS.
func StartClusterTLS(t testing.TB, files redisproc.TLSFiles) *Cluster {
	t.Helper()
	return StartClusterWith(t, redisproc.ClusterConfig{TLS: files})
}

// StartClusterPassword is StartCluster for a cluster whose nodes require
// password (redisproc.ClusterConfig.Password). Its Client gives it.
func StartClusterPassword(t testing.TB, password string) *Cluster {
	t.Helper()
	return StartClusterWith(t, redisproc.ClusterConfig{Password: password})
}

// StartClusterWith is StartCluster for a cluster started with cfg, whose
// settings may be combined (TLS and a password; Extra arguments such as
// --tls-auth-clients yes); its NodeTimeout defaults to NodeTimeout. Its
// Client connects as cfg says.
func StartClusterWith(t testing.TB, cfg redisproc.ClusterConfig) *Cluster {
	t.Helper()
	RequireCluster(t)
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = NodeTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := redisproc.StartCluster(ctx, t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return &Cluster{c}
}

// SharedCluster is one Redis Cluster for the tests of a package, started by
// the first Get and stopped by Stop, which the package's TestMain calls
// after m.Run. The zero value is ready; it is safe for concurrent use.
type SharedCluster struct {
	mu  sync.Mutex
	c   *redisproc.Cluster
	dir string
	err error
}

// Get returns the package's cluster, starting it on first use.
func (s *SharedCluster) Get(t testing.TB) *Cluster {
	t.Helper()
	RequireCluster(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil && s.err == nil {
		s.dir, s.err = os.MkdirTemp("", "weir-redis-cluster-")
		if s.err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
			s.c, s.err = redisproc.StartCluster(ctx, s.dir, redisproc.ClusterConfig{NodeTimeout: NodeTimeout})
			cancel()
		}
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	return &Cluster{s.c}
}

// Stop stops the cluster, if started, and removes its files.
func (s *SharedCluster) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		s.c.Stop()
		s.c = nil
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
		s.dir = ""
	}
}

// Client returns a go-redis cluster client of c, over TLS when c's nodes
// serve TLS, with c's password, closed when t ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), Password: c.Password, TLSConfig: c.TLS})
	t.Cleanup(func() { _ = rc.Close() })
	return rc
}

// KillPrimaryOf kills (SIGKILL) the primary serving slot; it returns the
// dead node's address.
func (c *Cluster) KillPrimaryOf(t testing.TB, slot int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr, err := c.Cluster.KillPrimaryOf(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// WaitPromoted waits until slot is served by a primary other than dead on
// every live node, and returns the new primary.
func (c *Cluster) WaitPromoted(t testing.TB, slot int, dead string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, err := c.Cluster.WaitPromoted(ctx, slot, dead)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Slot returns the hash slot of key.
func Slot(key string) int { return redisproc.Slot(key) }
