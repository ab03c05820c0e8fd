// Package redisproc runs redis-server processes: on a free loopback port
// (or a given one), without persistence, stopped by PID. The simulation and
// the demo start one per DC with it; package redistest wraps it for tests.
package redisproc

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Server is a running redis-server.
type Server struct {
	// Addr is the server's host:port on loopback.
	Addr string
	// Password is the password the server requires of clients (its
	// requirepass, given with AUTH or HELLO); empty when it requires
	// none.
	Password string
	// TLS, when not nil, is a client's TLS configuration for the server,
	// which then serves TLS alone on Addr; nil for plain TCP.
	TLS *tls.Config

	cmd  *exec.Cmd
	dir  string
	bin  string
	args []string
	// busPort is the cluster bus port of a cluster node, 0 for a plain
	// server; chosen free at the first start and kept on Restart.
	busPort int
	cluster bool
	// conf, for a Sentinel, is its configuration file, which redis-server
	// takes first and rewrites as the Sentinel learns.
	conf string
}

// Binary returns the path of redis-server, or "" when it is not installed.
// REDIS_SERVER overrides the search.
func Binary() string {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		return p
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/bin/redis-server", "/usr/local/bin/redis-server"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// start launches redis-server on port (0 picks a free one) and waits until
// it answers.
func (s *Server) start(port int) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		p := port
		if p == 0 {
			if p, err = freePort(); err != nil {
				return err
			}
		}
		ports := []string{"--port", strconv.Itoa(p)}
		if s.TLS != nil {
			ports = []string{"--port", "0", "--tls-port", strconv.Itoa(p)}
		}
		args := append(ports, s.args...)
		if s.conf != "" {
			args = append([]string{s.conf, "--sentinel"}, args...)
		}
		if s.cluster {
			// Redis's default bus port (port+10000) may be taken or out of
			// range: pick one as free as the client port.
			if s.busPort == 0 || (port == 0 && attempt > 0) {
				if s.busPort, err = freePort(); err != nil {
					return err
				}
			}
			args = append(args, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(s.busPort),
				"--cluster-config-file", "nodes.conf")
		}
		cmd := exec.Command(s.bin, args...)
		logf, ferr := os.Create(fmt.Sprintf("%s/redis-%d.log", s.dir, p))
		if ferr != nil {
			return ferr
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err = cmd.Start(); err != nil {
			logf.Close()
			return fmt.Errorf("redisproc: start %s: %w", s.bin, err)
		}
		go func() { _ = cmd.Wait(); logf.Close() }()
		s.cmd = cmd
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		if err = waitReady(s.Addr, s.Password, s.TLS, 5*time.Second); err == nil {
			return nil
		}
		_ = cmd.Process.Kill()
		if port != 0 {
			break
		}
	}
	return fmt.Errorf("redisproc: redis-server did not come up: %w (log in %s)", err, s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redisproc: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady waits until the server at addr answers PING, after AUTH with
// password when it is not empty, over TLS with tlsCfg when it is not nil,
// or timeout passes.
func waitReady(addr, password string, tlsCfg *tls.Config, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = ping(addr, password, tlsCfg); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// poll calls check every 20ms until it returns nil or ctx ends.
func poll(ctx context.Context, what string, check func() error) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisproc: wait for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// ping sends the server at addr AUTH password (when not empty) and PING,
// over TLS with tlsCfg when it is not nil, and reports an error unless it
// answers +OK and +PONG.
func ping(addr, password string, tlsCfg *tls.Config) error {
	var c net.Conn
	var err error
	dialer := &net.Dialer{Timeout: 200 * time.Millisecond}
	if tlsCfg != nil {
		c, err = tls.DialWithDialer(dialer, "tcp", addr, tlsCfg)
	} else {
		c, err = dialer.Dial("tcp", addr)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	var req strings.Builder
	want := []string{"+PONG"}
	if password != "" {
		// A RESP array, so that any byte of the password goes as it is.
		fmt.Fprintf(&req, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(password), password)
		want = []string{"+OK", "+PONG"}
	}
	req.WriteString("PING\r\n")
	if _, err := c.Write([]byte(req.String())); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	for _, prefix := range want {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if !strings.HasPrefix(line, prefix) {
			return fmt.Errorf("redisproc: got %q, want %s", strings.TrimSpace(line), prefix)
		}
	}
	return nil
}

// Stop kills the server and waits for it to exit. Safe to call twice.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(s.cmd.Process.Pid, 0) == nil; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	s.cmd = nil
}

// Pause stops the server's process (SIGSTOP) without closing its sockets:
// clients see a hung Redis. Resume undoes it.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	if s.cmd == nil || s.cmd.Process == nil {
		return fmt.Errorf("redisproc: server not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Start starts redis-server with its files in dir (which must exist) on a
// free loopback port. Extra arguments go to redis-server. The process is
// killed if this process dies.
func Start(dir string, extra ...string) (*Server, error) {
	return start(dir, serverOptions{}, extra)
}

// StartTLS is Start for a server that serves TLS alone, with files
// (clients are not asked for certificates unless extra sets
// --tls-auth-clients yes). The Server's TLS trusts files' CA.
func StartTLS(dir string, files TLSFiles, extra ...string) (*Server, error) {
	return start(dir, serverOptions{tls: &files}, extra)
}

// serverOptions are what start sets up beyond redis-server's extra
// arguments; the zero value is a plain server.
type serverOptions struct {
	// cluster runs the server in cluster mode.
	cluster bool
	// password, when not empty, is required of clients (requirepass).
	password string
	// tls, when not nil, has the server serve TLS alone, with its files.
	tls *TLSFiles
}

// start starts a redis-server with its files in dir, as opt says.
func start(dir string, opt serverOptions, extra []string) (*Server, error) {
	bin := Binary()
	if bin == "" {
		return nil, fmt.Errorf("redisproc: redis-server not found (Debian: apt-get install -y redis-server, or set REDIS_SERVER)")
	}
	s := &Server{dir: dir, bin: bin, cluster: opt.cluster, Password: opt.password}
	// A replica's first copy of its primary starts at once: Redis
	// otherwise waits 5 s (repl-diskless-sync-delay) for more replicas to
	// share the transfer.
	s.args = []string{
		"--save", "", "--appendonly", "no", "--bind", "127.0.0.1",
		"--protected-mode", "no", "--dir", dir, "--daemonize", "no",
		"--repl-diskless-sync-delay", "0",
	}
	if opt.password != "" {
		s.args = append(s.args, "--requirepass", opt.password)
	}
	if opt.tls != nil {
		var err error
		if s.TLS, err = opt.tls.clientConfig(); err != nil {
			return nil, err
		}
		s.args = append(s.args, opt.tls.args()...)
	}
	s.args = append(s.args, extra...)
	if err := s.start(0); err != nil {
		return nil, err
	}
	return s, nil
}

// Running reports whether the server was started and not stopped since.
func (s *Server) Running() bool { return s.cmd != nil }

// Restart starts the server again on the same port after Stop.
func (s *Server) Restart() error {
	_, portStr, _ := net.SplitHostPort(s.Addr)
	port, _ := strconv.Atoi(portStr)
	return s.start(port)
}
