// Package redistest starts throwaway redis-server processes for tests: one
// per call, on a free loopback port, without persistence, stopped by PID
// when the test ends (package redisproc). When redis-server is not
// installed the test is skipped with a loud message, except under CI=true,
// where it fails.
package redistest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/platform/redisproc"
)

// Server is a running redis-server.
type Server struct {
	*redisproc.Server
}

// Binary returns the path of redis-server, or "" when it is not installed.
// REDIS_SERVER overrides the search.
func Binary() string { return redisproc.Binary() }

// Require skips t (or, under CI=true, fails it) when redis-server is missing.
func Require(t testing.TB) string {
	t.Helper()
	bin := Binary()
	if bin != "" {
		return bin
	}
	msg := "redis-server not found: install it (Debian: apt-get install -y redis-server) or set REDIS_SERVER; Redis tests are SKIPPED"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	fmt.Fprintln(os.Stderr, "!!!", msg)
	t.Skip(msg)
	return ""
}

// Start starts a redis-server for t and stops it when t ends. Extra
// arguments are passed to redis-server ("--maxmemory", "1mb", ...).
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	Require(t)
	s, err := redisproc.Start(t.TempDir(), extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return &Server{s}
}

// StartTLS starts a redis-server that serves TLS alone, with files
// (redisproc.StartTLS), for t, and stops it when t ends.
func StartTLS(t testing.TB, files redisproc.TLSFiles, extra ...string) *Server {
	t.Helper()
	Require(t)
	s, err := redisproc.StartTLS(t.TempDir(), files, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return &Server{s}
}

// Client returns a go-redis client for the server, with its password
// when it requires one and over TLS when it serves TLS, closed when t
// ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: s.Password, TLSConfig: s.TLS})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// SentinelClient returns a go-redis client of the server as a Redis
// Sentinel (SENTINEL commands), with its password when it requires one
// and over TLS when it serves TLS, closed when t ends.
func (s *Server) SentinelClient(t testing.TB) *redis.SentinelClient {
	t.Helper()
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, Password: s.Password, TLSConfig: s.TLS})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Restart starts the server again on the same port after Stop.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.Server.Restart(); err != nil {
		t.Fatal(err)
	}
}

// Flush empties the server.
func (s *Server) Flush(ctx context.Context, t testing.TB) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: s.Password, TLSConfig: s.TLS})
	defer c.Close()
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

// Sentinel is a primary, its replica and the Redis Sentinels watching
// them under MasterName.
type Sentinel struct {
	Primary, Replica *Server
	Sentinels        []*Server
	MasterName       string
	s                *redisproc.Sentinel
}

// StartSentinel starts, for t, a primary, its replica and the Redis
// Sentinels watching them (redisproc.StartSentinel with cfg), stopped
// when t ends. With the zero cfg, one Sentinel watches them as
// "mymaster", nothing requires a password, and the Sentinel fails the
// primary over about a second after it stops answering.
func StartSentinel(t testing.TB, cfg redisproc.SentinelConfig) *Sentinel {
	t.Helper()
	Require(t)
	s, err := redisproc.StartSentinel(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	out := &Sentinel{Primary: &Server{s.Primary}, Replica: &Server{s.Replica}, MasterName: s.MasterName, s: s}
	for _, srv := range s.Sentinels {
		out.Sentinels = append(out.Sentinels, &Server{srv})
	}
	return out
}

// Failover has the Sentinels fail the primary over to the replica while
// both run (redisproc.Sentinel.Failover: SENTINEL FAILOVER, a planned
// switchover), asking again for up to 15 s until a Sentinel accepts, and
// returns once one has. Primary and Replica keep naming the servers they
// were started as.
func (s *Sentinel) Failover(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	if err := s.s.Failover(ctx); err != nil {
		t.Fatal(err)
	}
}
