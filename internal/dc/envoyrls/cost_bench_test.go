package envoyrls_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/dc/grpcapi"
	"github.com/weirhq/weir/internal/platform/cputime"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/rulesettest"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/store/coalesce"
	"github.com/weirhq/weir/pkg/store/redisstore"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// costRules is the Weir rule of the same limit as benchConfig's.
const costRules = `
domain: bench
rules:
  - rule_id: under
    conditions: {bench: under}
    key_type: user_id
    limit: 1000000000
    window_seconds: 1
`

// costPath is one way of asking for the same decisions.
type costPath struct {
	name  string
	items int // descriptors or items a call
	call  func(ctx context.Context, user int) error
}

func mustMarshal(b *testing.B, m proto.Message) []byte {
	b.Helper()
	out, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkEnvoyCost measures what answering on Envoy's API costs in CPU
// per decision beside weir.v1, over a real redis-server through the
// coalescer, as limiterd wires them. The handlers are called in-process
// around the decoding of the request and the encoding of the answer, as
// the gRPC server runs them (its transport, the same for both, is left
// out), so the figure is the ratio of the paths' own work: the ratio a
// whole limiter process shows lies between it and 1.
//
// Each iteration is a round that runs every path in turn (the order
// rotated round to round) for the same number of decisions from 16
// concurrent callers, and reads this process's CPU time around each:
// paired rounds cancel the drift of a shared machine's load; the medians
// (and 90th percentiles) of the per-round ratios are reported. Paths:
// envoy-N, Envoy's API on a domain loaded from an envoyproxy/ratelimit
// configuration (answered as the peer answers); envoyw-N, Envoy's API on
// a Weir rule; weir-N, weir.v1 Check on that rule; N descriptors or items
// a call. Run with -benchtime=Kx for K rounds (docs/benchmarks.md: 30x).
func BenchmarkEnvoyCost(b *testing.B) {
	srv := redistest.Start(b)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: true, PoolSize: 64})
	b.Cleanup(func() { _ = rc.Close() })
	rs, err := redisstore.New(rc, redisstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	co, err := coalesce.New(rs, coalesce.Config{Timeout: time.Second, Workers: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(co.Close)
	lim, err := limiter.New(limiter.Config{Store: co, StoreTimeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(lim.Close)
	envoy := benchService(b, lim, rulesettest.Compile(b, costRules))
	weir := grpcapi.NewService(lim)

	// Each path's requests are marshalled ahead, one per user: a call
	// decodes one, decides it and encodes the answer, as the gRPC server
	// does around the handler.
	const users = 1000
	var paths []costPath
	for _, n := range []int{1, 16} {
		for _, p := range []struct{ name, domain string }{{"envoy", "envoybench"}, {"envoyw", "bench"}} {
			wire := make([][]byte, users)
			for u := range users {
				req := &rlsv3.RateLimitRequest{Domain: p.domain}
				for i := range n {
					req.Descriptors = append(req.Descriptors, &rlcommonv3.RateLimitDescriptor{Entries: []*rlcommonv3.RateLimitDescriptor_Entry{
						{Key: "bench", Value: "under"}, {Key: "user_id", Value: "u" + strconv.Itoa(u*n+i)},
					}})
				}
				wire[u] = mustMarshal(b, req)
			}
			paths = append(paths, costPath{fmt.Sprintf("%s-%d", p.name, n), n, func(ctx context.Context, user int) error {
				resp, err := envoy.ShouldRateLimitWire(ctx, wire[user])
				if err != nil {
					return err
				}
				if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
					return fmt.Errorf("overall code %v, want OK", resp.GetOverallCode())
				}
				_, err = proto.Marshal(resp)
				return err
			}})
		}
		wire := make([][]byte, users)
		for u := range users {
			req := &weirv1.CheckRequest{Domain: "bench"}
			for i := range n {
				req.Items = append(req.Items, &weirv1.CheckItem{Attributes: map[string]string{"bench": "under", "user_id": "u" + strconv.Itoa(u*n+i)}})
			}
			wire[u] = mustMarshal(b, req)
		}
		paths = append(paths, costPath{fmt.Sprintf("weir-%d", n), n, func(ctx context.Context, user int) error {
			resp, err := weir.CheckWire(ctx, wire[user])
			if err != nil {
				return err
			}
			// The answer's first field: allowed (field 1, a varint: tag
			// 0x08), true.
			if !bytes.HasPrefix(resp, []byte{0x08, 1}) {
				return fmt.Errorf("not allowed: %x", resp)
			}
			return nil
		}})
	}

	const callers, decisions = 16, 16 * 1024
	cpu := map[string][]float64{} // path → µs of CPU per decision, per round
	round := 0
	for b.Loop() {
		for k := range paths {
			p := paths[(k+round)%len(paths)]
			n := p.items
			calls := decisions / n
			before := cpuTime(b)
			var wg sync.WaitGroup
			errs := make([]error, callers)
			for c := range callers {
				wg.Go(func() {
					for i := c; i < calls; i += callers {
						if err := p.call(context.Background(), i%users); err != nil {
							errs[c] = err
							return
						}
					}
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					b.Fatalf("%s: %v", p.name, err)
				}
			}
			cpu[p.name] = append(cpu[p.name], float64(cpuTime(b)-before)/1e3/float64(calls*n))
		}
		round++
	}
	for _, p := range paths {
		b.ReportMetric(median(cpu[p.name]), p.name+"-cpu-µs/decision")
	}
	for _, n := range []string{"1", "16"} {
		for _, a := range []string{"envoy", "envoyw"} {
			ratios := make([]float64, round)
			for r := range round {
				ratios[r] = cpu[a+"-"+n][r] / cpu["weir-"+n][r]
			}
			b.ReportMetric(median(ratios), a+"-"+n+"/weir-"+n)
			b.ReportMetric(quantile(ratios, 0.9), a+"-"+n+"/weir-"+n+"-p90")
		}
	}
}

// median returns the median of xs (0 for none).
func median(xs []float64) float64 { return quantile(xs, 0.5) }

// quantile returns the q-quantile of xs, nearest rank (0 for none).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// cpuTime returns this process's user and system CPU time in nanoseconds.
func cpuTime(b *testing.B) int64 {
	d, err := cputime.Self()
	if err != nil {
		b.Fatal(err)
	}
	return d.Nanoseconds()
}
