package redisstore_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/storetest"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/store/redisstore"
)

// BenchmarkRedisDecide measures decisions per second against a local
// redis-server: one EVALSHA per call, and batches of 16 (in one batch
// script, and in a pipeline of one EVALSHA each), from one goroutine and
// from 32. It also reports Redis's own work per
// decision: the commands its INFO commandstats counts (EVALSHA and the
// commands the script runs), the time it counts in EVALSHA (the scripts
// and their commands, without reading requests and writing replies: far
// less noisy here than the process's CPU), and the CPU time its INFO cpu
// counts (user + system, all of the server's threads).
//
// Each caller walks 10,000 keys in turn, so that a key is asked many
// times in each 1 s window (hot keys); batch16/conc32/spread instead asks
// 100,000 keys at random, so that nearly every decision meets its key in
// a new window, or expired, and its key is seldom in the CPU's caches, as
// make bench-envoy's 100k keys do.
func BenchmarkRedisDecide(b *testing.B) {
	srv := redistest.Start(b)
	c := srv.Client(b)
	ctx := context.Background()
	batched := newStore(b, c, "bench")
	perRequest, err := redisstore.New(c, redisstore.Config{Prefix: "bench", ScriptPerRequest: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, a := range algorithm.All {
		p := algorithm.Params{Algorithm: a, Limit: 1_000_000, Window: time.Second}
		if a == algorithm.SlidingWindowLog {
			p.Limit = 1000
		}
		// batch16 runs in batch scripts; batch16-per-request in a pipeline
		// of one EVALSHA per request (Config.ScriptPerRequest).
		for _, batch := range []int{1, 16, -16} {
			s, label := batched, "batch"+strconv.Itoa(batch)
			if batch < 0 {
				batch, s, label = -batch, perRequest, "batch"+strconv.Itoa(-batch)+"-per-request"
			}
			for _, run := range []struct {
				par    int
				spread bool
			}{{1, false}, {32, false}, {32, true}} {
				par := run.par
				name := a.String() + "/" + label + "/conc" + strconv.Itoa(par)
				if run.spread {
					if batch != 16 || s != batched {
						continue
					}
					name += "/spread"
				}
				b.Run(name, func(b *testing.B) {
					b.SetParallelism(max(1, par/2)) // GOMAXPROCS=2 here; recorded in docs
					if par == 1 {
						b.SetParallelism(1)
					}
					w0 := redisWork(b, c)
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
								k := n % 10_000
								if run.spread {
									k = rand.IntN(100_000)
								}
								reqs[i].Key = "k" + strconv.Itoa(k)
							}
							res, err := s.Decide(ctx, time.Now(), reqs)
							if err != nil || res[0].Err != nil {
								b.Error(err, res[0].Err)
								return
							}
						}
					})
					elapsed := time.Since(start)
					w1 := redisWork(b, c)
					n := float64(b.N * batch)
					b.ReportMetric(n/elapsed.Seconds(), "decisions/s")
					b.ReportMetric(float64(w1.cmds-w0.cmds-1)/n, "redis-cmds/decision") // less the INFO itself
					b.ReportMetric(float64(w1.scriptUsec-w0.scriptUsec)/n, "redis-script-µs/decision")
					b.ReportMetric((w1.cpu-w0.cpu)*1e6/n, "redis-µs/decision")
				})
			}
		}
	}
}

// work is what Redis has done so far: the commands it has run and the
// microseconds spent in scripts (INFO commandstats), and the CPU seconds
// it has used (INFO cpu).
type work struct {
	cmds, scriptUsec int64
	cpu              float64
}

// redisWork returns the work Redis has done so far.
func redisWork(b *testing.B, c *redis.Client) (w work) {
	b.Helper()
	ctx := context.Background()
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, calls := range commandStat(stats, "calls") {
		w.cmds += calls
	}
	usec := commandStat(stats, "usec")
	w.scriptUsec = usec["evalsha"] + usec["eval"]
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		name, v, _ := strings.Cut(line, ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu %q: %v", line, err)
			}
			w.cpu += f
		}
	}
	return w
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
