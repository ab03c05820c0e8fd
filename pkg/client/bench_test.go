package client_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/testkit/limitertest"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/pkg/client"
	"github.com/weirhq/weir/pkg/limiter"
)

const benchRules = `
domain: bench
rules:
  - {rule_id: per-user, key_type: user_id, limit: 1000000000, window_seconds: 60, algorithm: SlidingWindowCounter}
`

// BenchmarkClientCheck measures Checks of one item each through the
// client against one limiter (internal/dc/limiterd in this process, over
// a real redis-server), by 200 concurrent callers: single sends an RPC per
// Check, batched gathers the Checks of 1 ms into shared RPCs. It reports
// decisions/s, RPCs per decision, and this process's CPU time (client and
// limiter; redis-server is another process) per decision.
func BenchmarkClientCheck(b *testing.B) {
	lim := limitertest.Start(b, limiterd.Config{Redis: redistest.Start(b).Addr, StoreTimeout: time.Second}, benchRules)
	for _, mode := range []struct {
		name   string
		linger time.Duration
	}{{"single", 0}, {"batched", time.Millisecond}} {
		b.Run(mode.name, func(b *testing.B) {
			c, err := client.New(client.Config{Addrs: []string{lim.GRPC}, Linger: mode.linger, Timeout: 5 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var next, failed atomic.Int64
			before, cpu0, start := c.Stats(), cpuTime(b), time.Now()
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
			elapsed, cpu := time.Since(start), cpuTime(b)-cpu0
			after := c.Stats()
			if failed.Load() > 0 {
				b.Fatalf("%d of %d checks failed or were not decided by the store", failed.Load(), b.N)
			}
			n := float64(after.Checks - before.Checks)
			b.ReportMetric(n/elapsed.Seconds(), "decisions/s")
			b.ReportMetric(float64(after.RPCs-before.RPCs)/n, "rpcs/decision")
			b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/decision")
		})
	}
}

// cpuTime is this process's user and system time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
