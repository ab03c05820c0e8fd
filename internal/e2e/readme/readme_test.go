package readme_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ports are the fixed loopback ports of scripts/run-multidc.sh.
var ports = []int{8070, 8071, 8081, 8082, 8083, 9191, 9192, 9193, 2379, 9092, 6391, 6392, 6393}

// marker names the README block under test: the one that sources the
// environment file run-multidc writes.
const marker = ".cache/run-multidc/env"

// TestReadmeRunMultiDC starts run-multidc and runs the README's block of
// commands that goes with it, as a reader pastes them, with curl failing
// on an HTTP error.
func TestReadmeRunMultiDC(t *testing.T) {
	if testing.Short() {
		t.Skip("starts run-multidc: two coordinators, three limiters, etcd, a broker")
	}
	for _, tool := range []string{"bash", "curl", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block, err := fencedBlock(string(readme), marker)
	if err != nil {
		t.Fatal(err)
	}
	// docs/operations.md's weirctl block and docs/admin-api.md's curl
	// example are pasted against the same system after it.
	ops, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	opsBlock, err := fencedBlock(string(ops), marker)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := os.ReadFile(filepath.Join(root, "docs", "admin-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	adminBlock, err := fencedBlock(string(admin), marker)
	if err != nil {
		t.Fatal(err)
	}
	// The README's own ports when they are free; else the script's
	// PORT_OFFSET moves every port, and the block's are moved alike.
	off, ok := freeOffset()
	if !ok {
		t.Skipf("run-multidc's ports %v are in use, and so are they at every offset tried; free them to run this test", takenPorts(0))
	}
	if off != 0 {
		t.Logf("run-multidc's ports %v are in use (another run-multidc?): running with PORT_OFFSET=%d", takenPorts(0), off)
		block, opsBlock, adminBlock = shiftPorts(block, off), shiftPorts(opsBlock, off), shiftPorts(adminBlock, off)
	}

	dir := t.TempDir() // the reader's working directory: the block sources .cache/run-multidc/env
	logs := filepath.Join(dir, ".cache", "run-multidc")
	// The reader is in a checkout: the operations block applies
	// deploy/multidc/rules.yaml.
	if err := os.Symlink(filepath.Join(root, "deploy"), filepath.Join(dir, "deploy")); err != nil {
		t.Fatal(err)
	}
	up := startMultiDC(t, root, logs, off)
	select {
	case <-up.ready:
	case <-up.exited:
		t.Fatalf("run-multidc exited before it was ready:\n%s%s", up.output(), tails(logs))
	case <-time.After(4 * time.Minute):
		t.Fatalf("run-multidc not ready after 4 minutes:\n%s%s", up.output(), tails(logs))
	}

	// Each block runs as one script, so that what it sources stays in
	// force; curl fails on an HTTP error as a reader would see one. The
	// first seconds after start the leader may not have planned every
	// rule yet, so a block that can run twice is run again until it passes
	// or time is up; the admin API example creates and deletes a rule, and
	// runs once.
	for _, b := range []struct {
		name, block string
		again       bool
	}{
		{"README.md", block, true},
		{"docs/operations.md", opsBlock, true},
		{"docs/admin-api.md", adminBlock, false},
	} {
		out, err := runBlock(dir, b.block, b.again)
		if err != nil {
			t.Fatalf("the block of %s failed (%v):\n%s\noutput:\n%s%s", b.name, err, b.block, out, tails(logs))
		}
		t.Logf("%s block:\n%s\noutput:\n%s", b.name, b.block, out)
	}
}

// runBlock runs a block of pasted commands in dir as one bash script that
// stops at the first failing command, again for up to 30 s while it fails
// when again is set.
func runBlock(dir, block string, again bool) ([]byte, error) {
	script := "set -euo pipefail\n" +
		"curl() { command curl --fail-with-body \"$@\"; }\n" +
		"trap 'echo \"command failed: $BASH_COMMAND\" >&2' ERR\n" + block
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, "bash", "-c", script)
		cmd.Dir = dir
		cmd.Env = readerEnv()
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || !again || time.Now().After(deadline) {
			return out, err
		}
		time.Sleep(time.Second)
	}
}

// fencedBlock returns the body of the first fenced code block of md that
// contains marker.
func fencedBlock(md, marker string) (string, error) {
	var body []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		switch {
		case !in && strings.HasPrefix(line, "```"):
			in, body = true, nil
		case in && strings.HasPrefix(line, "```"):
			in = false
			if b := strings.Join(body, "\n"); strings.Contains(b, marker) {
				return b + "\n", nil
			}
		case in:
			body = append(body, line)
		}
	}
	return "", fmt.Errorf("no fenced block holds %q: the document changed; keep a block that goes with `make run-multidc` and sources the env file", marker)
}

// freeOffset returns a PORT_OFFSET at which every port of run-multidc is
// free: 0 if it can.
func freeOffset() (int, bool) {
	for _, off := range []int{0, 20000, 21000, 22000, 23000, 24000} {
		if len(takenPorts(off)) == 0 {
			return off, true
		}
	}
	return 0, false
}

// portRef is a port of a loopback URL in the README: ":8070" and the like.
var portRef = regexp.MustCompile(`:(\d{4})\b`)

// shiftPorts moves the ports of run-multidc that cmds names by off.
func shiftPorts(cmds string, off int) string {
	return portRef.ReplaceAllStringFunc(cmds, func(m string) string {
		p, _ := strconv.Atoi(m[1:])
		if slices.Contains(ports, p) {
			return ":" + strconv.Itoa(p+off)
		}
		return m
	})
}

// takenPorts returns the ports of run-multidc, moved by off, that
// something listens on.
func takenPorts(off int) []int {
	var taken []int
	for _, p := range ports {
		p += off
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			taken = append(taken, p)
			continue
		}
		ln.Close()
	}
	return taken
}

// readerEnv is the test's environment without the WEIR_ variables, so
// that only what the README has the reader source sets them.
func readerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEIR_") {
			env = append(env, kv)
		}
	}
	return env
}

// multiDC is a running scripts/run-multidc.sh.
type multiDC struct {
	ready, exited chan struct{}
	mu            sync.Mutex
	out           bytes.Buffer
}

func (m *multiDC) output() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.out.String()
}

// startMultiDC starts the script with its logs in logs and its ports
// moved by off; it is stopped as
// Ctrl-C stops it (SIGINT to its process group) when the test ends.
func startMultiDC(t *testing.T, root, logs string, off int) *multiDC {
	t.Helper()
	m := &multiDC{ready: make(chan struct{}), exited: make(chan struct{})}
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "run-multidc.sh"))
	cmd.Dir = root
	cmd.Env = append(readerEnv(), "LOGS="+logs, "PORT_OFFSET="+strconv.Itoa(off))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	pgid := cmd.Process.Pid
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			m.mu.Lock()
			m.out.WriteString(sc.Text() + "\n")
			m.mu.Unlock()
			if strings.HasPrefix(sc.Text(), "Weir is running") {
				once.Do(func() { close(m.ready) })
			}
		}
	}()
	waited := make(chan error, 1)
	go func() {
		<-scanned
		waited <- cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGINT)
		select {
		case err := <-waited:
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Errorf("run-multidc: %v", err)
			}
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			t.Errorf("run-multidc did not stop within 30s of SIGINT")
			<-waited
		}
		if taken := takenPorts(off); len(taken) > 0 {
			t.Errorf("after run-multidc stopped, ports %v are still in use", taken)
		}
	})
	return m
}

// tails returns the last lines of each log of run-multidc, for a failure.
func tails(logs string) string {
	files, _ := filepath.Glob(filepath.Join(logs, "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		fmt.Fprintf(&b, "\n== %s (last lines)\n%s\n", filepath.Base(f), strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	return b.String()
}
