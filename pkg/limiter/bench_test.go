package limiter_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/platform/cputime"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/pkg/limiter"
)

const benchYAML = `
domain: bench
rules:
  - {rule_id: open, key_type: k, limit: 1000000000, window_seconds: 60, algorithm: SlidingWindowCounter, failure_mode: open, conditions: {mode: open}}
  - {rule_id: local, key_type: k, limit: 1000000000, window_seconds: 60, algorithm: SlidingWindowCounter, failure_mode: local, conditions: {mode: local}}
`

// BenchmarkCheckRedis measures Check against a real redis-server, by
// failure mode: a rule of failure_mode local also counts each admission in
// memory (so that an outage does not restart the count), and the
// difference between the two is that cost. It reports the limiter's own
// CPU time per decision (this process's user+system time; redis-server is
// another process), which unlike ns/op does not depend on Redis's latency.
func BenchmarkCheckRedis(b *testing.B) {
	l := redisLimiter(b, redistest.Start(b), nil, benchYAML, func(cfg *limiter.Config) { cfg.StoreTimeout = time.Second })
	for _, mode := range []string{"open", "local"} {
		for _, keys := range []int{1, 100_000} {
			b.Run(mode+"/keys-"+strconv.Itoa(keys), func(b *testing.B) {
				var next atomic.Int64
				b.SetParallelism(16)
				before := cpuTime(b)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						k := strconv.Itoa(int(next.Add(1) % int64(keys)))
						resp, err := l.Check(context.Background(), limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"mode": mode, "k": k}}}})
						if err != nil || !resp.Allowed || resp.Items[0].Results[0].Source != limiter.SourceStore {
							b.Errorf("check: %v %+v", err, resp)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(cpuTime(b)-before)/float64(b.N)/1e3, "cpu-µs/op")
			})
		}
	}
}

// cpuTime returns this process's user and system CPU time in nanoseconds.
func cpuTime(b *testing.B) int64 {
	d, err := cputime.Self()
	if err != nil {
		b.Fatal(err)
	}
	return d.Nanoseconds()
}
