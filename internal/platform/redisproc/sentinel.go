package redisproc

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// Sentinel is a Redis primary with one replica, watched by one Redis
// Sentinel under a master name: the smallest deployment in which the
// Sentinel fails the primary over to the replica.
type Sentinel struct {
	Primary, Replica, Sentinel *Server
	// MasterName is the name the Sentinel monitors the primary under.
	MasterName string
}

// SentinelConfig configures StartSentinel.
type SentinelConfig struct {
	// MasterName defaults to "mymaster".
	MasterName string
	// DownAfterMillis is how long the primary must not answer before the
	// Sentinel deems it down and fails over; default 1000.
	DownAfterMillis int
	// Password, when not empty, is the password the primary and the
	// replica require of clients (requirepass), and give each other to
	// replicate (masterauth); the Sentinel gives it to them too
	// (sentinel auth-pass). Empty, the default: none. Both passwords go
	// into the Sentinel's configuration file quoted as Go quotes them,
	// which Redis reads alike for printable ASCII.
	Password string
	// SentinelPassword, when not empty, is the password the Sentinel
	// requires of clients (requirepass in its configuration file).
	// Empty, the default: none.
	SentinelPassword string
	// TLS, when its CertFile is set, has the primary, the replica and
	// the Sentinel serve TLS alone, all with these files; the replica
	// replicates, and the Sentinel watches, over TLS. The default: plain
	// TCP.
	TLS TLSFiles
}

// StartSentinel starts a primary, its replica and a Sentinel (quorum 1)
// with their files under dir (which must exist). Stop stops all three.
func StartSentinel(dir string, cfg SentinelConfig) (*Sentinel, error) {
	if cfg.MasterName == "" {
		cfg.MasterName = "mymaster"
	}
	if cfg.DownAfterMillis == 0 {
		cfg.DownAfterMillis = 1000
	}
	out := &Sentinel{MasterName: cfg.MasterName}
	mkdir := func(name string) (string, error) {
		d := filepath.Join(dir, name)
		return d, os.MkdirAll(d, 0o755)
	}
	pdir, err := mkdir("primary")
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	var auth []string
	if cfg.Password != "" {
		// The replica authenticates to the primary with masterauth; the
		// primary has it too, for when it comes back as a replica of
		// the promoted one.
		auth = []string{"--masterauth", cfg.Password}
	}
	opt := serverOptions{password: cfg.Password}
	if cfg.TLS.CertFile != "" {
		opt.tls = &cfg.TLS
	}
	if out.Primary, err = start(pdir, opt, auth); err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(out.Primary.Addr)
	rdir, err := mkdir("replica")
	if err == nil {
		out.Replica, err = start(rdir, opt, append(auth, "--replicaof", host, port))
	}
	if err != nil {
		out.Stop()
		return nil, fmt.Errorf("redisproc: replica: %w", err)
	}
	sdir, err := mkdir("sentinel")
	if err != nil {
		out.Stop()
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	conf := filepath.Join(sdir, "sentinel.conf")
	text := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s 1\nsentinel down-after-milliseconds %[1]s %[4]d\nsentinel failover-timeout %[1]s 5000\n",
		cfg.MasterName, host, port, cfg.DownAfterMillis)
	if cfg.Password != "" {
		text += fmt.Sprintf("sentinel auth-pass %s %s\n", cfg.MasterName, strconv.Quote(cfg.Password))
	}
	if cfg.SentinelPassword != "" {
		text += fmt.Sprintf("requirepass %s\n", strconv.Quote(cfg.SentinelPassword))
	}
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		out.Stop()
		return nil, fmt.Errorf("redisproc: sentinel config: %w", err)
	}
	bin := Binary()
	if bin == "" {
		out.Stop()
		return nil, fmt.Errorf("redisproc: redis-server not found")
	}
	out.Sentinel = &Server{dir: sdir, bin: bin, conf: conf, Password: cfg.SentinelPassword, TLS: out.Primary.TLS, args: []string{"--bind", "127.0.0.1", "--protected-mode", "no", "--dir", sdir, "--daemonize", "no"}}
	if opt.tls != nil {
		out.Sentinel.args = append(out.Sentinel.args, opt.tls.args()...)
	}
	if err := out.Sentinel.start(0); err != nil {
		out.Stop()
		return nil, err
	}
	return out, nil
}

// Stop stops the Sentinel, the replica and the primary. Safe to call
// twice.
func (s *Sentinel) Stop() {
	for _, srv := range []*Server{s.Sentinel, s.Replica, s.Primary} {
		if srv != nil {
			srv.Stop()
		}
	}
}
