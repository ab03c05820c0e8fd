package redisproc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Slots is the number of hash slots of Redis Cluster.
const Slots = 16384

// ClusterConfig configures a local Redis Cluster. The zero value is usable.
type ClusterConfig struct {
	// NodeTimeout is cluster-node-timeout: how long a primary may be
	// unreachable before the others mark it failed and its replica takes
	// over. Default 1s. A failover takes about NodeTimeout plus the
	// replica's election delay (0.5 to 1 s).
	NodeTimeout time.Duration
	// TLS, when its CertFile is set, has every node serve TLS alone with
	// these files: to clients, on the cluster bus (tls-cluster yes, so
	// nodes announce their TLS port) and to its replicas. redis-cli
	// creates the cluster over TLS, presenting CertFile and trusting
	// CAFile, and so do the Cluster's own clients. Nodes do not ask
	// clients for a certificate unless Extra has --tls-auth-clients
	// yes; then CAFile must trust CertFile (the nodes present it to each
	// other too) and every client's. It may be set with Password. The
	// default: plain TCP.
	TLS TLSFiles
	// Password, when not empty, is required of clients by every node
	// (requirepass), and given by replicas to their primaries
	// (masterauth); redis-cli creates the cluster with it, and the
	// Cluster's own clients use it. The default: none.
	Password string
	// Users are ACL users (Redis 6) every node has besides the default
	// user, each as a `user` line of redis.conf without the word user:
	// "name on >password rules…", words separated by spaces, none
	// containing one. ACL users are not replicated: every node gets them
	// all, so that they still log in on a promoted replica. The
	// Cluster's own clients, and redis-cli, use the default user. The
	// default: none.
	Users []string
	// Extra arguments go to every redis-server.
	Extra []string
}

// Cluster is a local Redis Cluster: three primaries and one replica of
// each, on free loopback ports, created by redis-cli --cluster create.
// Nodes are kept in start order; which of them are primaries changes with
// failovers (see PrimaryOf).
type Cluster struct {
	Nodes []*Server
	// TLS, when not nil, is a client's TLS configuration for every node,
	// which then serves TLS alone (ClusterConfig.TLS); nil for plain TCP.
	TLS *tls.Config
	// Password is the password every node requires (ClusterConfig.Password);
	// empty for none.
	Password string
	cfg      ClusterConfig
}

// CLIBinary returns the path of redis-cli, or "" when it is not installed.
// REDIS_CLI overrides the search; otherwise it is looked for on PATH and
// next to redis-server.
func CLIBinary() string {
	if p := os.Getenv("REDIS_CLI"); p != "" {
		return p
	}
	if p, err := exec.LookPath("redis-cli"); err == nil {
		return p
	}
	if srv := Binary(); srv != "" {
		p := filepath.Join(filepath.Dir(srv), "redis-cli")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// StartCluster starts six cluster-mode redis-servers with their files under
// dir (which must exist), creates a cluster of three primaries with one
// replica each, and waits until every node reports cluster_state:ok and
// every replica is in sync; over TLS alone when cfg.TLS says so. Each node
// runs with cluster-require-full-coverage no, so a dead primary stops only
// its own slots. On error every started node is stopped.
func StartCluster(ctx context.Context, dir string, cfg ClusterConfig) (*Cluster, error) {
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = time.Second
	}
	cli := CLIBinary()
	if cli == "" {
		return nil, fmt.Errorf("redisproc: redis-cli not found (Debian: apt-get install -y redis-tools, or set REDIS_CLI)")
	}
	c := &Cluster{cfg: cfg}
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	extra := append([]string{
		"--cluster-node-timeout", strconv.FormatInt(cfg.NodeTimeout.Milliseconds(), 10),
		"--cluster-require-full-coverage", "no",
		// A replica may always take over, however long it was cut off.
		"--cluster-replica-validity-factor", "0",
	}, cfg.Extra...)
	opt := serverOptions{cluster: true, password: cfg.Password}
	var cliArgs []string
	if cfg.Password != "" {
		extra = append([]string{"--masterauth", cfg.Password}, extra...)
		cliArgs = []string{"-a", cfg.Password, "--no-auth-warning"}
	}
	for _, u := range cfg.Users {
		extra = append(append(extra, "--user"), strings.Fields(u)...)
	}
	if cfg.TLS.CertFile != "" {
		opt.tls = &cfg.TLS
		// With tls-cluster the bus speaks TLS, and a node announces its
		// TLS port: without it, the plain port, 0 here, which no client
		// can follow.
		extra = append([]string{"--tls-cluster", "yes"}, extra...)
		cliArgs = append(cliArgs, "--tls", "--cacert", cfg.TLS.CAFile, "--cert", cfg.TLS.CertFile, "--key", cfg.TLS.KeyFile)
	}
	for i := range 6 {
		nodeDir := filepath.Join(dir, "node"+strconv.Itoa(i))
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			return nil, fmt.Errorf("redisproc: %w", err)
		}
		s, err := start(nodeDir, opt, extra)
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
		c.TLS, c.Password = s.TLS, s.Password
	}
	args := append(cliArgs, "--cluster", "create")
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("redisproc: redis-cli --cluster create: %w\n%s", err, out)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// Addrs returns the address of every node, live or not, in start order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr
	}
	return addrs
}

// Stop kills every node. Safe to call twice.
func (c *Cluster) Stop() {
	for _, s := range c.Nodes {
		s.Stop()
	}
}

// Node returns the node listening on addr, or nil.
func (c *Cluster) Node(addr string) *Server {
	for _, s := range c.Nodes {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// admin runs fn with a client of node addr of c, over TLS when c's nodes
// serve TLS, with c's password.
func admin[T any](ctx context.Context, c *Cluster, addr string, fn func(*redis.Client) (T, error)) (T, error) {
	rc := redis.NewClient(&redis.Options{Addr: addr, Password: c.Password, TLSConfig: c.TLS, MaxRetries: -1, DialTimeout: time.Second})
	defer rc.Close()
	return fn(rc)
}

// WaitHealthy waits until every live node reports cluster_state:ok, agrees
// that every slot has a primary among the live nodes, and every live
// replica's link to its primary is up.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	return poll(ctx, "cluster healthy", func() error {
		for _, s := range c.live() {
			info, err := admin(ctx, c, s.Addr, func(rc *redis.Client) (string, error) {
				return rc.ClusterInfo(ctx).Result()
			})
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return fmt.Errorf("%s: cluster_state not ok", s.Addr)
			}
			owners, err := c.slotOwners(ctx, s.Addr)
			if err != nil {
				return err
			}
			for slot, o := range owners {
				if o == "" || c.Node(o) == nil || !c.Node(o).Running() {
					return fmt.Errorf("%s: slot %d has no live primary (%q)", s.Addr, slot, o)
				}
			}
			repl, err := admin(ctx, c, s.Addr, func(rc *redis.Client) (string, error) {
				return rc.Info(ctx, "replication").Result()
			})
			if err != nil {
				return err
			}
			if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
				return fmt.Errorf("%s: replica not in sync", s.Addr)
			}
		}
		return nil
	})
}

// live returns the running nodes.
func (c *Cluster) live() []*Server {
	var out []*Server
	for _, s := range c.Nodes {
		if s.Running() {
			out = append(out, s)
		}
	}
	return out
}

// slotOwners returns, as node addr sees it, the primary of every slot.
func (c *Cluster) slotOwners(ctx context.Context, addr string) ([]string, error) {
	slots, err := admin(ctx, c, addr, func(rc *redis.Client) ([]redis.ClusterSlot, error) {
		// CLUSTER SLOTS names each range's serving primary first, as the
		// clients' slot maps (go-redis's included) read it.
		//lint:ignore SA1019 the kit must see what the clients see
		return rc.ClusterSlots(ctx).Result()
	})
	if err != nil {
		return nil, err
	}
	owners := make([]string, Slots)
	for _, r := range slots {
		if len(r.Nodes) == 0 {
			continue
		}
		for i := r.Start; i <= r.End && i < Slots; i++ {
			owners[i] = r.Nodes[0].Addr
		}
	}
	return owners, nil
}

// PrimaryOf returns the address of the primary serving slot, as the first
// live node sees it.
func (c *Cluster) PrimaryOf(ctx context.Context, slot int) (string, error) {
	live := c.live()
	if len(live) == 0 {
		return "", errors.New("redisproc: no live node")
	}
	owners, err := c.slotOwners(ctx, live[0].Addr)
	if err != nil {
		return "", fmt.Errorf("redisproc: slots of %s: %w", live[0].Addr, err)
	}
	return owners[slot], nil
}

// Primaries returns the address of every primary that serves slots, as the
// first live node sees it, each once, in slot order.
func (c *Cluster) Primaries(ctx context.Context) ([]string, error) {
	live := c.live()
	if len(live) == 0 {
		return nil, errors.New("redisproc: no live node")
	}
	owners, err := c.slotOwners(ctx, live[0].Addr)
	if err != nil {
		return nil, fmt.Errorf("redisproc: slots of %s: %w", live[0].Addr, err)
	}
	var out []string
	for _, o := range owners {
		if o != "" && (len(out) == 0 || out[len(out)-1] != o) {
			out = append(out, o)
		}
	}
	return out, nil
}

// KillPrimaryOf kills (SIGKILL) the primary serving slot and returns its
// address.
func (c *Cluster) KillPrimaryOf(ctx context.Context, slot int) (string, error) {
	addr, err := c.PrimaryOf(ctx, slot)
	if err != nil {
		return "", err
	}
	s := c.Node(addr)
	if s == nil {
		return "", fmt.Errorf("redisproc: primary %s of slot %d is not one of the cluster's nodes", addr, slot)
	}
	s.Stop()
	return addr, nil
}

// WaitPromoted waits until every live node agrees that slot is served by a
// live primary other than dead, and reports cluster_state:ok; it returns
// the new primary's address.
func (c *Cluster) WaitPromoted(ctx context.Context, slot int, dead string) (string, error) {
	var primary string
	err := poll(ctx, "replica promoted", func() error {
		var seen string
		for _, s := range c.live() {
			owners, err := c.slotOwners(ctx, s.Addr)
			if err != nil {
				return err
			}
			o := owners[slot]
			if o == "" || o == dead || (seen != "" && o != seen) {
				return fmt.Errorf("%s: slot %d served by %q", s.Addr, slot, o)
			}
			seen = o
			info, err := admin(ctx, c, s.Addr, func(rc *redis.Client) (string, error) {
				return rc.ClusterInfo(ctx).Result()
			})
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return fmt.Errorf("%s: cluster_state not ok", s.Addr)
			}
		}
		primary = seen
		return nil
	})
	return primary, err
}

// Migration is a slot on its way from one primary to another: begun by
// BeginMigration, its keys moved by MoveKeys, ended by Finish. In between,
// the source answers ASK for keys it no longer holds.
type Migration struct {
	c              *Cluster
	Slot           int
	From, To       string
	fromID, toID   string
	toHost, toPort string
}

// BeginMigration marks slot as importing on to and migrating on its current
// primary.
func (c *Cluster) BeginMigration(ctx context.Context, slot int, to string) (*Migration, error) {
	from, err := c.PrimaryOf(ctx, slot)
	if err != nil {
		return nil, err
	}
	if from == to {
		return nil, fmt.Errorf("redisproc: slot %d is already on %s", slot, to)
	}
	m := &Migration{c: c, Slot: slot, From: from, To: to}
	if m.fromID, err = c.nodeID(ctx, from); err != nil {
		return nil, err
	}
	if m.toID, err = c.nodeID(ctx, to); err != nil {
		return nil, err
	}
	m.toHost, m.toPort, _ = net.SplitHostPort(to)
	if err := c.setSlot(ctx, to, slot, "importing", m.fromID); err != nil {
		return nil, err
	}
	if err := c.setSlot(ctx, from, slot, "migrating", m.toID); err != nil {
		return nil, err
	}
	return m, nil
}

// MoveKeys moves up to n keys of the slot (all when n <= 0) to the target,
// one MIGRATE per key, and returns how many it moved.
func (m *Migration) MoveKeys(ctx context.Context, n int) (int, error) {
	return admin(ctx, m.c, m.From, func(rc *redis.Client) (int, error) {
		moved := 0
		for n <= 0 || moved < n {
			keys, err := rc.ClusterGetKeysInSlot(ctx, m.Slot, 1).Result()
			if err != nil {
				return moved, fmt.Errorf("redisproc: keys of slot %d on %s: %w", m.Slot, m.From, err)
			}
			if len(keys) == 0 {
				return moved, nil
			}
			args := []any{"migrate", m.toHost, m.toPort, "", 0, 5000}
			if m.c.Password != "" {
				args = append(args, "auth", m.c.Password)
			}
			if err := rc.Do(ctx, append(args, "keys", keys[0])...).Err(); err != nil {
				return moved, fmt.Errorf("redisproc: migrate %s to %s: %w", keys[0], m.To, err)
			}
			moved++
		}
		return moved, nil
	})
}

// Finish moves the keys left and gives the slot to the target on every
// live primary, the target first.
func (m *Migration) Finish(ctx context.Context) error {
	if _, err := m.MoveKeys(ctx, 0); err != nil {
		return err
	}
	if err := m.c.setSlot(ctx, m.To, m.Slot, "node", m.toID); err != nil {
		return err
	}
	if err := m.c.setSlot(ctx, m.From, m.Slot, "node", m.toID); err != nil {
		return err
	}
	primaries, err := m.c.Primaries(ctx)
	if err != nil {
		return err
	}
	for _, p := range primaries {
		if p != m.To && p != m.From {
			if err := m.c.setSlot(ctx, p, m.Slot, "node", m.toID); err != nil {
				return err
			}
		}
	}
	return nil
}

// MigrateSlot moves slot, keys and all, to the primary at to.
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, to string) error {
	m, err := c.BeginMigration(ctx, slot, to)
	if err != nil {
		return err
	}
	return m.Finish(ctx)
}

func (c *Cluster) nodeID(ctx context.Context, addr string) (string, error) {
	id, err := admin(ctx, c, addr, func(rc *redis.Client) (string, error) {
		return rc.Do(ctx, "cluster", "myid").Text()
	})
	if err != nil {
		return "", fmt.Errorf("redisproc: cluster myid of %s: %w", addr, err)
	}
	return id, nil
}

func (c *Cluster) setSlot(ctx context.Context, addr string, slot int, state, id string) error {
	_, err := admin(ctx, c, addr, func(rc *redis.Client) (string, error) {
		return rc.Do(ctx, "cluster", "setslot", slot, state, id).Text()
	})
	if err != nil {
		return fmt.Errorf("redisproc: cluster setslot %d %s %s on %s: %w", slot, state, id, addr, err)
	}
	return nil
}

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key, or of its hash tag (the part between the first "{" and the next "}"
// when not empty), modulo 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % Slots
}
