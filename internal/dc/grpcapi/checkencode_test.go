package grpcapi

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

// randomResponse is a limiter response of random shape and values: every
// source (and one out of range), allowed or not, shadow or not, numbers
// zero, negative and large, refunded or not, strings empty and long enough for two-byte
// lengths, times before 1970 and with nanoseconds.
func randomResponse(rng *rand.Rand) limiter.Response {
	pick := func(vs ...int64) int64 { return vs[rng.IntN(len(vs))] }
	str := func() string {
		switch rng.IntN(4) {
		case 0:
			return ""
		case 1:
			return strings.Repeat("k", 1+rng.IntN(300))
		}
		return "v" + string(rune('a'+rng.IntN(26)))
	}
	advices := []rule.RetryAdvice{rule.RetryAfter, rule.ExponentialBackoff, rule.DailyLimitReached, ""}
	resp := limiter.Response{Allowed: rng.IntN(2) == 0}
	for range rng.IntN(20) {
		it := limiter.ItemResult{Allowed: rng.IntN(2) == 0, Decisive: int(pick(-1, 0, 1, 3, 1<<31-1))}
		for range rng.IntN(5) {
			spec := rule.Rule{
				ID: str(), Shadow: rng.IntN(3) == 0, WindowSeconds: pick(0, 1, 60, 86400, 31*86400),
				RejectionMessage: str(), RetryAdvice: advices[rng.IntN(len(advices))],
			}
			r := limiter.RuleResult{
				Match:    ruleset.Match{Rule: &ruleset.Rule{Spec: spec}, Key: str()},
				Source:   limiter.Source(pick(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 200)),
				Refunded: rng.IntN(3) == 0,
				Decision: algorithm.Decision{
					Allowed:    rng.IntN(2) == 0,
					Limit:      pick(0, 1, 100, -5, 1<<62),
					Remaining:  pick(0, 1, 99, -1, 1<<40),
					ResetAt:    time.Unix(pick(0, 1, 1764000000, -86400, 1<<40), pick(0, 1, 999999999)),
					RetryAfter: time.Duration(pick(0, -1, 1, int64(time.Second), int64(90*time.Second+5))),
				},
			}
			it.Results = append(it.Results, r)
		}
		resp.Items = append(resp.Items, it)
	}
	return resp
}

// The encoder writes the bytes proto.Marshal makes of the generated
// messages checkResponse builds, and says their size.
func TestEncodeCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		resp := randomResponse(rng)
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(checkResponse(&resp))
		if err != nil {
			t.Fatal(err)
		}
		enc := newCheckEncoder(resp)
		if n := proto.Size(enc); n != len(want) {
			t.Fatalf("case %d: size %d, want %d", i, n, len(want))
		}
		got, err := proto.Marshal(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d: encoded\n%x\nwant\n%x", i, got, want)
		}
		// Appended to what a buffer holds already, as grpc-go's codec does.
		got, err = proto.MarshalOptions{}.MarshalAppend([]byte("prefix"), newCheckEncoder(resp))
		if err != nil || !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("case %d: appended: %v", i, err)
		}
	}
}

func BenchmarkEncodeCheck(b *testing.B) {
	resp := limiter.Response{Allowed: true}
	spec := rule.Rule{ID: "under", WindowSeconds: 1, RetryAdvice: rule.RetryAfter}
	for i := range 16 {
		resp.Items = append(resp.Items, limiter.ItemResult{Allowed: true, Results: []limiter.RuleResult{{
			Match:    ruleset.Match{Rule: &ruleset.Rule{Spec: spec}, Key: "user" + string(rune('a'+i))},
			Source:   limiter.SourceStore,
			Decision: algorithm.Decision{Allowed: true, Limit: 1000000000, Remaining: 999999000, ResetAt: time.Unix(1764000000, 0)},
		}}})
	}
	b.Run("weir", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := proto.Marshal(newCheckEncoder(resp)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := proto.Marshal(checkResponse(&resp)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
