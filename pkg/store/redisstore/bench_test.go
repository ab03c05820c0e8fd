package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/storetest"
	"github.com/weirhq/weir/pkg/algorithm"
)

// BenchmarkRedisDecide measures decisions per second against a local
// redis-server: one EVALSHA per call, and batches of 16 in one pipeline,
// from one goroutine and from 32.
func BenchmarkRedisDecide(b *testing.B) {
	srv := redistest.Start(b)
	c := srv.Client(b)
	s := newStore(b, c, "bench")
	ctx := context.Background()
	for _, a := range algorithm.All {
		p := algorithm.Params{Algorithm: a, Limit: 1_000_000, Window: time.Second}
		if a == algorithm.SlidingWindowLog {
			p.Limit = 1000
		}
		for _, batch := range []int{1, 16} {
			for _, par := range []int{1, 32} {
				name := a.String() + "/batch" + strconv.Itoa(batch) + "/conc" + strconv.Itoa(par)
				b.Run(name, func(b *testing.B) {
					b.SetParallelism(max(1, par/2)) // GOMAXPROCS=2 here; recorded in docs
					if par == 1 {
						b.SetParallelism(1)
					}
					start := time.Now()
					b.RunParallel(func(pb *testing.PB) {
						reqs := make([]algorithm.Request, batch)
						for i := range reqs {
							reqs[i] = algorithm.Request{Params: p, Cost: 1}
						}
						n := 0
						for pb.Next() {
							for i := range reqs {
								n++
								reqs[i].Key = "k" + strconv.Itoa(n%10_000)
							}
							res, err := s.Decide(ctx, time.Now(), reqs)
							if err != nil || res[0].Err != nil {
								b.Error(err, res[0].Err)
								return
							}
						}
					})
					b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "decisions/s")
				})
			}
		}
	}
}

// BenchmarkRedisMemory reports the Redis memory one active key takes, per
// algorithm, as MEMORY USAGE measures it (key, value and overhead), for a
// realistic key "api-global-default/203.0.113.77" with state in the current
// window (and, for the window counters, the previous one). The sliding
// window log is measured with 10 entries (run it with -benchtime 1x), and grows by about one entry's
// size per admitted request.
func BenchmarkRedisMemory(b *testing.B) {
	srv := redistest.Start(b)
	c := srv.Client(b)
	ctx := context.Background()
	s := newStore(b, c, "weir")
	for _, a := range algorithm.All {
		b.Run(a.String(), func(b *testing.B) {
			p := algorithm.Params{Algorithm: a, Limit: 100, Window: time.Minute}
			const keys = 500
			var total int64
			for b.Loop() {
				// Keys get TTLs in Redis's real time while the state uses
				// the fake clock: measure each key right after writing it.
				total = 0
				for i := range keys {
					r := algorithm.Request{Key: "api-global-default/203.0.113." + strconv.Itoa(i), Params: p, Cost: 1}
					// Ten requests 5 s apart, across a window boundary:
					// the previous and the current window both hold counts,
					// and the log holds all ten.
					for j := range 10 {
						if _, err := s.Decide(ctx, storetest.T0.Add(time.Duration(40+5*j)*time.Second), []algorithm.Request{r}); err != nil {
							b.Fatal(err)
						}
					}
					n, err := c.MemoryUsage(ctx, s.RedisKey(r), 0).Result()
					if err != nil {
						b.Fatalf("MEMORY USAGE %s: %v", s.RedisKey(r), err)
					}
					total += n
				}
			}
			b.ReportMetric(float64(total)/keys, "B/key")
			if !strings.Contains(s.RedisKey(algorithm.Request{Key: "x", Params: p}), "{x}") {
				b.Fatal("key has no hash tag")
			}
		})
	}
}
