// Package redistest starts throwaway redis-server processes for tests: one
// per call, on a free loopback port, without persistence, stopped by PID
// when the test ends. When redis-server is not installed the test is
// skipped with a loud message, except under CI=true, where it fails.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a running redis-server.
type Server struct {
	// Addr is the server's host:port on loopback.
	Addr string
	cmd  *exec.Cmd
	dir  string
	args []string
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
	bin := Require(t)
	s := &Server{dir: t.TempDir()}
	s.args = append([]string{
		"--save", "", "--appendonly", "no", "--bind", "127.0.0.1",
		"--protected-mode", "no", "--dir", s.dir, "--daemonize", "no",
	}, extra...)
	if err := s.start(bin, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// start launches redis-server on port (0 picks a free one) and waits until
// it answers.
func (s *Server) start(bin string, port int) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		p := port
		if p == 0 {
			if p, err = freePort(); err != nil {
				return err
			}
		}
		args := append([]string{"--port", strconv.Itoa(p)}, s.args...)
		cmd := exec.Command(bin, args...)
		logf, ferr := os.Create(fmt.Sprintf("%s/redis-%d.log", s.dir, p))
		if ferr != nil {
			return ferr
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err = cmd.Start(); err != nil {
			logf.Close()
			return fmt.Errorf("redistest: start %s: %w", bin, err)
		}
		go func() { _ = cmd.Wait(); logf.Close() }()
		s.cmd = cmd
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		if err = waitReady(s.Addr, 5*time.Second); err == nil {
			return nil
		}
		_ = cmd.Process.Kill()
		if port != 0 {
			break
		}
	}
	return fmt.Errorf("redistest: redis-server did not come up: %w (log in %s)", err, s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitReady(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		var c net.Conn
		c, err = net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, err = c.Write([]byte("PING\r\n"))
			if err == nil {
				var line string
				line, err = bufio.NewReader(c).ReadString('\n')
				if err == nil && strings.HasPrefix(line, "+PONG") {
					c.Close()
					return nil
				}
			}
			c.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// Client returns a go-redis client for the server, closed when t ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
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
		return fmt.Errorf("redistest: server not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Restart starts the server again on the same port after Stop.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	_, portStr, _ := net.SplitHostPort(s.Addr)
	port, _ := strconv.Atoi(portStr)
	if err := s.start(Require(t), port); err != nil {
		t.Fatal(err)
	}
}

// Flush empties the server.
func (s *Server) Flush(ctx context.Context, t testing.TB) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}
