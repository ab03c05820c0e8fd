// Package etcdtest starts a real etcd, embedded in the test process, for
// tests: one member on loopback free ports, started in well under a second.
package etcdtest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/weirhq/weir/internal/platform/embedetcd"
)

// Cluster is an embedded etcd owned by a test; it stops when the test ends.
type Cluster struct {
	t        testing.TB
	dir      string
	mu       sync.Mutex
	srv      *embedetcd.Server
	endpoint string
}

// Start starts an etcd for t, retrying when a free port was taken in
// between.
func Start(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{t: t, dir: t.TempDir()}
	c.start("127.0.0.1:0")
	t.Cleanup(c.Stop)
	return c
}

func (c *Cluster) start(addr string) {
	c.t.Helper()
	var err error
	for range 5 {
		var srv *embedetcd.Server
		srv, err = embedetcd.Start(context.Background(), embedetcd.Config{Dir: c.dir, ClientAddr: addr})
		if err == nil {
			c.mu.Lock()
			c.srv, c.endpoint = srv, srv.Endpoint()
			c.mu.Unlock()
			return
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("etcdtest: %v", err)
}

// Endpoints are the client URLs.
func (c *Cluster) Endpoints() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return []string{c.endpoint}
}

// Client returns a new client, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Stop stops the server, keeping its data; Restart brings it back on the
// same address. Stopping twice is harmless.
func (c *Cluster) Stop() {
	c.mu.Lock()
	srv := c.srv
	c.srv = nil
	c.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// Restart starts a stopped server again on the same address, with its data.
func (c *Cluster) Restart() {
	c.t.Helper()
	c.Stop()
	addr := strings.TrimPrefix(c.Endpoints()[0], "http://")
	c.start(addr)
}
