package envoyrls_test

import (
	"context"
	"strconv"
	"testing"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/weirhq/weir/internal/dc/envoyrls"
	"github.com/weirhq/weir/pkg/envoyconf"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rulefile"
	"github.com/weirhq/weir/pkg/ruleset"
	"github.com/weirhq/weir/pkg/store/memstore"
)

const benchConfig = `
domain: envoybench
descriptors:
  - key: bench
    value: under
    descriptors:
      - key: user_id
        rate_limit: {unit: second, requests_per_unit: 1000000000}
`

// BenchmarkShouldRateLimitPeer is the translation's CPU on a domain loaded
// from an envoyproxy/ratelimit configuration, over the memory store: for
// profiles (go test -bench -cpuprofile), not for figures.
func BenchmarkShouldRateLimitPeer(b *testing.B) {
	store, err := memstore.New(memstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	lim, err := limiter.New(limiter.Config{Store: store})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(lim.Close)
	svc := benchService(b, lim)
	for _, n := range []int{1, 16} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			req := &rlsv3.RateLimitRequest{Domain: "envoybench"}
			for i := range n {
				req.Descriptors = append(req.Descriptors, &rlcommonv3.RateLimitDescriptor{Entries: []*rlcommonv3.RateLimitDescriptor_Entry{
					{Key: "bench", Value: "under"}, {Key: "user_id", Value: "user-" + strconv.Itoa(i)},
				}})
			}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := svc.ShouldRateLimit(context.Background(), req)
				if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
					b.Fatalf("got %v %v, want OK", resp, err)
				}
			}
		})
	}
}

// benchService loads benchConfig (domain envoybench) into lim beside
// others, and returns Envoy's API over lim, answering envoybench as
// envoyproxy/ratelimit does and every other domain by Weir's rules.
func benchService(b *testing.B, lim *limiter.Limiter, others ...*ruleset.Set) *envoyrls.Service {
	b.Helper()
	e, err := rulefile.ParseEnvoyConfig([]byte(benchConfig))
	if err != nil {
		b.Fatal(err)
	}
	set, err := ruleset.Compile(e.Rules)
	if err != nil {
		b.Fatal(err)
	}
	if err := lim.SetRules(append([]*ruleset.Set{set}, others...)...); err != nil {
		b.Fatal(err)
	}
	return envoyrls.NewService(lim, envoyrls.Config{Configs: func(d string) *envoyconf.Domain {
		if d == set.Domain() {
			return e.Tree
		}
		return nil
	}})
}
