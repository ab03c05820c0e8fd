package redisproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/platform/redisinfo"
)

// Sentinel is a Redis primary with one replica, watched by one or more
// Redis Sentinels under a master name: the smallest deployment in which
// the Sentinels fail the primary over to the replica.
type Sentinel struct {
	Primary, Replica *Server
	// Sentinels are every Sentinel watching the primary, in start order.
	Sentinels []*Server
	// MasterName is the name the Sentinels monitor the primary under.
	MasterName string
}

// SentinelConfig configures StartSentinel.
type SentinelConfig struct {
	// MasterName defaults to "mymaster".
	MasterName string
	// DownAfterMillis is how long the primary must not answer before the
	// Sentinels deem it down and fail over; default 1000.
	DownAfterMillis int
	// Sentinels is how many Sentinels watch the primary, with a quorum
	// of a majority of them; default 1. With more than one, they know
	// each other when StartSentinel returns, so that a majority of the
	// Sentinels started can elect a leader to fail over even when the
	// others are stopped.
	Sentinels int
	// Password, when not empty, is the password the primary and the
	// replica require of clients (requirepass), and give each other to
	// replicate (masterauth); the Sentinels give it to them too
	// (sentinel auth-pass). Empty, the default: none. Both passwords go
	// into the Sentinels' configuration file quoted as Go quotes them,
	// which Redis reads alike for printable ASCII.
	Password string
	// SentinelPassword, when not empty, is the password the Sentinels
	// require of clients (requirepass in their configuration file), and
	// give each other. Empty, the default: none.
	SentinelPassword string
	// Users are ACL users (Redis 6) the primary and the replica have
	// besides the default user, each as a `user` line of redis.conf
	// without the word user: "name on >password rules…", words
	// separated by spaces, none containing one. ACL users are not
	// replicated: both servers get them all, so that they still log in
	// once the replica is promoted. The default: none.
	Users []string
	// SentinelUsers are ACL users the Sentinels have besides the default
	// user, in the same form (Redis 6.2). The default: none.
	SentinelUsers []string
	// TLS, when its CertFile is set, has the primary, the replica and
	// the Sentinels serve TLS alone, all with these files; the replica
	// replicates, and the Sentinels watch, over TLS. The default: plain
	// TCP.
	TLS TLSFiles
	// Extra are redis-server arguments every server gets, the primary,
	// the replica and the Sentinels, after the kit's own (which they
	// override): "--tls-auth-clients", "yes" has them all ask clients for
	// a certificate that TLS.CAFile trusts, each other included.
	Extra []string
}

// StartSentinel starts a primary, its replica and cfg.Sentinels
// Sentinels with their files under dir (which must exist). Stop stops
// them all.
func StartSentinel(dir string, cfg SentinelConfig) (*Sentinel, error) {
	if cfg.MasterName == "" {
		cfg.MasterName = "mymaster"
	}
	if cfg.DownAfterMillis == 0 {
		cfg.DownAfterMillis = 1000
	}
	if cfg.Sentinels == 0 {
		cfg.Sentinels = 1
	}
	out := &Sentinel{MasterName: cfg.MasterName}
	ok := false
	defer func() {
		if !ok {
			out.Stop()
		}
	}()
	mkdir := func(name string) (string, error) {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("redisproc: %w", err)
		}
		return d, nil
	}
	pdir, err := mkdir("primary")
	if err != nil {
		return nil, err
	}
	var args []string
	if cfg.Password != "" {
		// The replica authenticates to the primary with masterauth; the
		// primary has it too, for when it comes back as a replica of
		// the promoted one.
		args = []string{"--masterauth", cfg.Password}
	}
	for _, u := range cfg.Users {
		args = append(append(args, "--user"), strings.Fields(u)...)
	}
	args = append(args, cfg.Extra...)
	opt := serverOptions{password: cfg.Password}
	if cfg.TLS.CertFile != "" {
		opt.tls = &cfg.TLS
	}
	if out.Primary, err = start(pdir, opt, args); err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(out.Primary.Addr)
	rdir, err := mkdir("replica")
	if err != nil {
		return nil, err
	}
	if out.Replica, err = start(rdir, opt, append(args, "--replicaof", host, port)); err != nil {
		return nil, fmt.Errorf("redisproc: replica: %w", err)
	}
	text := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s %[5]d\nsentinel down-after-milliseconds %[1]s %[4]d\nsentinel failover-timeout %[1]s 5000\n",
		cfg.MasterName, host, port, cfg.DownAfterMillis, cfg.Sentinels/2+1)
	if cfg.Password != "" {
		text += fmt.Sprintf("sentinel auth-pass %s %s\n", cfg.MasterName, strconv.Quote(cfg.Password))
	}
	if cfg.SentinelPassword != "" {
		text += fmt.Sprintf("requirepass %s\n", strconv.Quote(cfg.SentinelPassword))
	}
	for _, u := range cfg.SentinelUsers {
		text += "user " + u + "\n"
	}
	bin := Binary()
	if bin == "" {
		return nil, fmt.Errorf("redisproc: redis-server not found")
	}
	for i := range cfg.Sentinels {
		sdir, err := mkdir(fmt.Sprintf("sentinel%d", i+1))
		if err != nil {
			return nil, err
		}
		// Each Sentinel rewrites its own file as it learns.
		conf := filepath.Join(sdir, "sentinel.conf")
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return nil, fmt.Errorf("redisproc: sentinel config: %w", err)
		}
		s := &Server{dir: sdir, bin: bin, conf: conf, Password: cfg.SentinelPassword, TLS: out.Primary.TLS, args: []string{"--bind", "127.0.0.1", "--protected-mode", "no", "--dir", sdir, "--daemonize", "no"}}
		if opt.tls != nil {
			s.args = append(s.args, opt.tls.args()...)
		}
		s.args = append(s.args, cfg.Extra...)
		if err := s.start(0); err != nil {
			return nil, err
		}
		out.Sentinels = append(out.Sentinels, s)
	}
	if err := out.waitAcquainted(); err != nil {
		return nil, err
	}
	ok = true
	return out, nil
}

// waitAcquainted waits, up to 15 s, until every Sentinel knows every
// other: they find each other through the primary, each announcing
// itself there every 2 s.
func (s *Sentinel) waitAcquainted() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return poll(ctx, "Sentinels that know each other", func() error {
		for _, srv := range s.Sentinels {
			c := redis.NewSentinelClient(srv.kitOptions())
			known, err := c.Sentinels(ctx, s.MasterName).Result()
			_ = c.Close()
			if err != nil {
				return fmt.Errorf("%s: SENTINEL SENTINELS: %w", srv.Addr, err)
			}
			if len(known) != len(s.Sentinels)-1 {
				return fmt.Errorf("%s knows %d other Sentinels, want %d", srv.Addr, len(known), len(s.Sentinels)-1)
			}
		}
		return nil
	})
}

// Stop stops the Sentinels, the replica and the primary. Safe to call
// twice.
func (s *Sentinel) Stop() {
	for _, srv := range s.Sentinels {
		srv.Stop()
	}
	for _, srv := range []*Server{s.Replica, s.Primary} {
		if srv != nil {
			srv.Stop()
		}
	}
}

// Failover has the Sentinels fail the primary over to the replica while
// both run (SENTINEL FAILOVER, asked of the first Sentinel running): a
// planned switchover. The Sentinels promote the replica, name it as the
// primary, and some seconds later demote the old primary to a replica of
// it. Failover first waits until the replica has what the primary had
// written when it was called (a Sentinel would promote a replica that has
// not yet made its first copy, and lose it all); then, as a Sentinel
// refuses (NOGOODSLAVE) until it has seen the replica, it asks every 20ms
// until one accepts or ctx ends, and returns once one has accepted.
// Primary and Replica keep naming the servers they were started as.
func (s *Sentinel) Failover(ctx context.Context) error {
	var srv *Server
	for _, c := range s.Sentinels {
		if c.Running() {
			srv = c
			break
		}
	}
	if srv == nil {
		return fmt.Errorf("redisproc: no Sentinel running")
	}
	written, err := replOffset(ctx, s.Primary, "master_repl_offset")
	if err != nil {
		return err
	}
	if err := poll(ctx, "the replica in sync", func() error {
		got, err := replOffset(ctx, s.Replica, "slave_repl_offset")
		if err == nil && got < written {
			err = fmt.Errorf("replica at offset %d, primary at %d", got, written)
		}
		return err
	}); err != nil {
		return err
	}
	c := redis.NewSentinelClient(srv.kitOptions())
	defer c.Close()
	return poll(ctx, "a Sentinel that accepts SENTINEL FAILOVER", func() error {
		return c.Failover(ctx, s.MasterName).Err()
	})
}

// replOffset returns the replication offset named field (INFO
// replication) of srv: a replica's is -1 until its link to the primary
// is up.
func replOffset(ctx context.Context, srv *Server, field string) (int64, error) {
	c := redis.NewClient(srv.kitOptions())
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return 0, fmt.Errorf("redisproc: INFO replication of %s: %w", srv.Addr, err)
	}
	fields := redisinfo.Fields(info)
	if field == "slave_repl_offset" && fields["master_link_status"] != "up" {
		return -1, nil
	}
	if v, ok := fields[field]; ok {
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("redisproc: INFO replication of %s has no %s", srv.Addr, field)
}

// kitOptions are the options of the kit's own clients of s: its address,
// password and TLS, no retries, a dial bounded by a second.
func (s *Server) kitOptions() *redis.Options {
	return &redis.Options{Addr: s.Addr, Password: s.Password, TLSConfig: s.TLS, MaxRetries: -1, DialTimeout: time.Second}
}
