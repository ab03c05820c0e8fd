package main_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/platform/cputime"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/pkg/client"
	"github.com/weirhq/weir/pkg/limiter"
)

const clientBenchRules = `
domain: bench
rules:
  - {rule_id: per-user, key_type: user_id, limit: 1000000000, window_seconds: 60, algorithm: SlidingWindowCounter}
`

// BenchmarkClientBatchingLimiterCPU measures pkg/client against the
// limiter binary in a process of its own, over a real redis-server: 200
// concurrent callers of one item each (a key of their own), single (an
// RPC per Check) and batched (1 ms linger). It reports decisions/s, RPCs
// per decision, the limiter process's CPU per decision (from
// /proc/PID/stat) and this process's, the client's; B/op and allocs/op
// are the client's.
func BenchmarkClientBatchingLimiterCPU(b *testing.B) {
	if testing.Short() {
		b.Skip("starts redis-server and the limiter binary")
	}
	srv := redistest.Start(b)
	rulesPath := filepath.Join(b.TempDir(), "rules.yaml")
	writeFile(b, rulesPath, clientBenchRules)
	p := startLimiter(b, []string{"--dc", "bench", "--redis", srv.Addr, "--rules", rulesPath,
		"--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--store-timeout", "1s"})
	for _, mode := range []struct {
		name   string
		linger time.Duration
	}{{"single", 0}, {"batched", time.Millisecond}} {
		b.Run(mode.name, func(b *testing.B) {
			c, err := client.New(client.Config{Addrs: []string{p.grpc}, Linger: mode.linger, Timeout: 5 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var next, failed atomic.Int64
			before, cpu0, self0, start := c.Stats(), procCPU(b, p.cmd.Process.Pid), selfCPU(b), time.Now()
			b.ReportAllocs()
			b.SetParallelism(max(1, 200/runtime.GOMAXPROCS(0))) // 200 callers
			b.RunParallel(func(pb *testing.PB) {
				req := limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"user_id": fmt.Sprint("u", next.Add(1))}}}}
				for pb.Next() {
					resp, err := c.Check(context.Background(), req)
					if err != nil || !resp.Allowed || resp.Items[0].Results[0].Source != limiter.SourceStore {
						failed.Add(1)
					}
				}
			})
			elapsed, cpu, self := time.Since(start), procCPU(b, p.cmd.Process.Pid)-cpu0, selfCPU(b)-self0
			after := c.Stats()
			if failed.Load() > 0 {
				b.Fatalf("%d of %d checks failed or were not decided by the store", failed.Load(), b.N)
			}
			n := float64(after.Checks - before.Checks)
			b.ReportMetric(n/elapsed.Seconds(), "decisions/s")
			b.ReportMetric(float64(after.RPCs-before.RPCs)/n, "rpcs/decision")
			b.ReportMetric(float64(cpu.Microseconds())/n, "limiter-cpu-µs/decision")
			b.ReportMetric(float64(self.Microseconds())/n, "client-cpu-µs/decision")
		})
	}
}

// procCPU returns the CPU time process pid has used so far.
func procCPU(b *testing.B, pid int) time.Duration {
	d, err := cputime.Process(pid)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// selfCPU returns the CPU time this process has used so far.
func selfCPU(b *testing.B) time.Duration {
	d, err := cputime.Self()
	if err != nil {
		b.Fatal(err)
	}
	return d
}
