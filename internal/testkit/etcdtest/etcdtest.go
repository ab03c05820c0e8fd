// Package etcdtest starts a real etcd, embedded in the test process, for
// tests: one member on loopback free ports, started in well under a second
// (Start), or a cluster of several members on distinct loopback client and
// peer ports (StartCluster) whose members a test can stop and restart one
// by one.
package etcdtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/etcd/etcdclient"
	"github.com/weirhq/weir/internal/platform/embedetcd"
)

// Cluster is an embedded etcd owned by a test; it stops when the test ends.
// Its methods are safe for concurrent use.
type Cluster struct {
	t       testing.TB
	members []*member
}

// member is one etcd member: its configuration (addresses fixed at the
// first start, so that a restart comes back where its peers expect it) and
// its server while it runs.
type member struct {
	cfg embedetcd.Config
	mu  sync.Mutex
	srv *embedetcd.Server
}

// Start starts a one-member etcd for t, retrying when a free port was
// taken in between.
func Start(t testing.TB) *Cluster {
	t.Helper()
	return StartTLS(t, embedetcd.TLS{})
}

// StartTLS starts a one-member etcd for t serving clients with the TLS
// files given (https:// endpoints; client certificates required when
// tls.ClientCA is set), as Start does without. Client does not fit such an
// etcd: tests connect with clients of their own.
func StartTLS(t testing.TB, tls embedetcd.TLS) *Cluster {
	t.Helper()
	c := &Cluster{t: t, members: []*member{{cfg: embedetcd.Config{Dir: t.TempDir(), ClientAddr: "127.0.0.1:0", TLS: tls}}}}
	var err error
	for range 5 {
		if err = c.members[0].start(); err == nil || !addrInUse(err) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(c.stopAll)
	return c
}

// StartCluster starts an n-member etcd cluster for t, every member in this
// process on its own loopback client and peer ports, with Raft timings
// (heartbeat 50 ms, election 500 ms) that a loaded 2-core machine keeps
// without spurious elections. It returns once every member serves clients.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	var err error
	for range 5 {
		var c *Cluster
		if c, err = startCluster(t, n); err == nil {
			t.Cleanup(c.stopAll)
			return c
		}
		if !addrInUse(err) {
			break
		}
	}
	t.Fatalf("etcdtest: %d-member cluster: %v", n, err)
	return nil
}

func startCluster(t testing.TB, n int) (*Cluster, error) {
	c := &Cluster{t: t}
	var initial []string
	for i := range n {
		client, err := embedetcd.FreeAddr("127.0.0.1")
		if err != nil {
			return nil, err
		}
		peer, err := embedetcd.FreeAddr("127.0.0.1")
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("m%d", i)
		initial = append(initial, name+"=http://"+peer)
		c.members = append(c.members, &member{cfg: embedetcd.Config{
			Dir: t.TempDir(), Name: name, ClientAddr: client, PeerAddr: peer,
			TickMs: 50, ElectionMs: 500, StartTimeout: 30 * time.Second,
		}})
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, m := range c.members {
		m.cfg.InitialCluster = strings.Join(initial, ",")
		wg.Go(func() { errs[i] = m.start() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.stopAll()
			return nil, err
		}
	}
	return c, nil
}

func (m *member) start() error {
	m.mu.Lock()
	cfg := m.cfg
	m.mu.Unlock()
	srv, err := embedetcd.Start(context.Background(), cfg)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.srv = srv
	_, m.cfg.ClientAddr, _ = strings.Cut(srv.Endpoint(), "://") // port 0 resolved
	m.mu.Unlock()
	return nil
}

func (m *member) stop(kill bool) {
	m.mu.Lock()
	srv := m.srv
	m.srv = nil
	m.mu.Unlock()
	switch {
	case srv == nil:
	case kill:
		srv.Kill()
	default:
		srv.Close()
	}
}

func (m *member) endpoint() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cfg.TLS.Cert != "" {
		return "https://" + m.cfg.ClientAddr
	}
	return "http://" + m.cfg.ClientAddr
}

func addrInUse(err error) bool { return strings.Contains(err.Error(), "address already in use") }

// Endpoints are the client URLs of every member, running or not.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.endpoint()
	}
	return out
}

// Client returns a new client of every member, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: c.Endpoints()})
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// User is an etcd user EnableAuth adds, with a role of the same name
// that holds Grants.
type User struct {
	Name, Password string
	Grants         []Grant
}

// Grant is a role's permission on the keys under Prefix: read, or read
// and write.
type Grant struct {
	Prefix string
	Write  bool
}

// EnableAuth turns authentication on in admin's etcd (a client that may
// still write without a user: one of a fresh Cluster, or of a client
// certificate etcd takes for root), after adding user root (password
// "rootpw"), which auth requires, and users.
func EnableAuth(t testing.TB, admin *clientv3.Client, users ...User) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type step struct {
		what string
		do   func() error
	}
	steps := []step{
		{"add user root", func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err }},
		{"grant root its role", func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err }},
	}
	for _, u := range users {
		steps = append(steps, step{"add role " + u.Name, func() error { _, err := admin.RoleAdd(ctx, u.Name); return err }})
		for _, g := range u.Grants {
			perm := clientv3.PermRead
			if g.Write {
				perm = clientv3.PermReadWrite
			}
			steps = append(steps, step{fmt.Sprintf("grant role %s %v on %s", u.Name, perm, g.Prefix), func() error {
				_, err := admin.RoleGrantPermission(ctx, u.Name, g.Prefix, clientv3.GetPrefixRangeEnd(g.Prefix), clientv3.PermissionType(perm))
				return err
			}})
		}
		steps = append(steps,
			step{"add user " + u.Name, func() error { _, err := admin.UserAdd(ctx, u.Name, u.Password); return err }},
			step{"grant user " + u.Name + " its role", func() error { _, err := admin.UserGrantRole(ctx, u.Name, u.Name); return err }})
	}
	steps = append(steps, step{"enable auth", func() error { _, err := admin.AuthEnable(ctx); return err }})
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("etcdtest: enable auth: %s: %v", s.what, err)
		}
	}
}

// WeirUser returns a User named weir (password weirpw) who may read and
// write every key under /weir/, Weir's default prefix.
func WeirUser() User {
	return User{Name: "weir", Password: "weirpw", Grants: []Grant{{Prefix: "/weir/", Write: true}}}
}

// Members is the number of members.
func (c *Cluster) Members() int { return len(c.members) }

// Leader returns the index of the member that is the Raft leader now, or
// -1 when no running member leads.
func (c *Cluster) Leader() int {
	for i, m := range c.members {
		m.mu.Lock()
		leads := m.srv != nil && m.srv.IsLeader()
		m.mu.Unlock()
		if leads {
			return i
		}
	}
	return -1
}

// KillMember stops member i as a crash would (a leader does not hand its
// leadership over), keeping its data; killing a stopped member is harmless.
func (c *Cluster) KillMember(i int) { c.members[i].stop(true) }

// RestartMember starts stopped member i again on its addresses and data;
// it rejoins the cluster. It fails the test when the member cannot start.
func (c *Cluster) RestartMember(i int) {
	c.t.Helper()
	m := c.members[i]
	m.stop(false)
	var err error
	for range 5 {
		if err = m.start(); err == nil || !addrInUse(err) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("etcdtest: restart member %d: %v", i, err)
	}
}

// Stop stops every member, keeping the data; Restart brings a one-member
// etcd back on the same address. Stopping twice is harmless.
func (c *Cluster) Stop() { c.stopAll() }

func (c *Cluster) stopAll() {
	for _, m := range c.members {
		m.stop(false)
	}
}

// Restart starts a stopped one-member etcd again on the same address, with
// its data.
func (c *Cluster) Restart() {
	c.t.Helper()
	c.RestartMember(0)
}
