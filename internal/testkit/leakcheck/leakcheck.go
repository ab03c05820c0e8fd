// Package leakcheck is the one goroutine-leak check of Weir's tests: every
// package whose code starts goroutines calls Main from its TestMain, so a
// goroutine that outlives the tests that started it fails the package; and
// a test that must prove one component stops its own goroutines while other
// tests run beside it calls Check.
package leakcheck

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// settle is how long the checks wait for goroutines that are already on
// their way out (a closed connection's reader, a cancelled watch).
const settle = 5 * time.Second

// ignored are goroutines that libraries start once per process and never
// stop; they are not ours to leak.
var ignored = []goleak.Option{
	// glog/klog-style flush daemons and the opencensus view worker that
	// etcd's and gRPC's dependencies start at init.
	goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
	goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	// A net/http keep-alive connection of http.DefaultTransport, which
	// stays until its idle timeout; tests close their own clients.
	goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
}

// Main runs the package's tests, then fails the run when goroutines other
// than the test binary's own and the ignored ones are still running after
// a short settle time. Call it from TestMain:
//
//	func TestMain(m *testing.M) { leakcheck.Main(m) }
func Main(m *testing.M) {
	goleak.VerifyTestMain(m, ignored...)
}

// Check registers a cleanup that runs Gone once t's other cleanups have
// run: the test fails when goroutines whose stack mentions any of funcs
// outlive it. Unlike Main it ignores every other goroutine, so it works
// beside parallel tests.
func Check(t testing.TB, funcs ...string) {
	t.Helper()
	if len(funcs) == 0 {
		t.Fatal("leakcheck.Check needs at least one function or package to look for")
	}
	t.Cleanup(func() { Gone(t, funcs...) })
}

// Gone waits up to a settle time for every goroutine whose stack mentions
// any of funcs (package paths or function names, matched as substrings) to
// end, and fails t with their stacks when some are still running.
func Gone(t testing.TB, funcs ...string) {
	t.Helper()
	deadline := time.Now().Add(settle)
	for {
		leaked := running(funcs)
		if len(leaked) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running returns the stacks of the goroutines that mention any of funcs,
// except the one asking and the testing package's own (the main goroutine
// and those running tests), which mention the test functions.
func running(funcs []string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var leaked []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "leakcheck.running") || strings.Contains(g, "testing.tRunner(") || strings.Contains(g, "testing.(*M).Run(") {
			continue
		}
		for _, f := range funcs {
			if strings.Contains(g, f) {
				leaked = append(leaked, g)
				break
			}
		}
	}
	return leaked
}
