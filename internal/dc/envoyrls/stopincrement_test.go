package envoyrls_test

import (
	"fmt"
	"testing"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/weirhq/weir/internal/dc/envoyrls"
)

// TestStopIncrementWhenOverLimit replays envoyproxy/ratelimit's
// integration test of STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT on its
// "another" domain (key2 20 a minute, key3 10 an hour), on a real Redis
// and on memory: 15 calls of both descriptors. From the 11th, key3 is
// over its limit and so is the call; with the setting, key2 stops
// counting there (its remaining stays 10), without it key2 counts on.
func TestStopIncrementWhenOverLimit(t *testing.T) {
	for _, ps := range peerStores {
		for _, stop := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stop %v", ps.name, stop), func(t *testing.T) {
				svc, _ := peerServiceWith(t, ps.open(t), envoyrls.Config{StopIncrementWhenOverLimit: stop}, peerAnother)
				for i := range 15 {
					resp, err := svc.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "another", HitsAddend: 1,
						Descriptors: []*rlcommonv3.RateLimitDescriptor{desc("key2", "v"), desc("key3", "v")}})
					if err != nil {
						t.Fatal(err)
					}
					over := i >= 10
					key2, key3 := uint32(20-(i+1)), uint32(10-(i+1))
					if over {
						key3 = 0
						if stop {
							key2 = 10
						}
					}
					check(t, fmt.Sprintf("call %d", i+1), resp, over,
						st{remaining: key2, perUnit: 20, unit: mins, reset: 50},
						st{over: over, remaining: key3, perUnit: 10, unit: hour, reset: 3590})
				}
			})
		}
	}
	// A descriptor over its limit in shadow_mode or quota_mode stops the
	// others' counting too, as the peer's check of the counters ignores
	// both: big (5,000,000 a minute) keeps its remaining.
	for _, ps := range peerStores {
		for _, over := range []string{"watched", "quota"} {
			t.Run(fmt.Sprintf("%s/beside %s", ps.name, over), func(t *testing.T) {
				svc, _ := peerServiceWith(t, ps.open(t), envoyrls.Config{StopIncrementWhenOverLimit: true}, peerMixed)
				for i, want := range []uint32{4_999_999, 4_999_999, 4_999_999} {
					resp, err := svc.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "mixed",
						Descriptors: []*rlcommonv3.RateLimitDescriptor{desc(over, "v"), desc("big", "v")}})
					if err != nil {
						t.Fatal(err)
					}
					if got := resp.GetStatuses()[1].GetLimitRemaining(); got != want {
						t.Errorf("call %d: big's remaining: got %d, want %d", i+1, got, want)
					}
				}
			})
		}
	}
	// On a domain of Weir rules too: c (5 a minute) beside a (1 a minute)
	// stops counting once a is over.
	for _, stop := range []bool{false, true} {
		t.Run(fmt.Sprintf("weir rules/stop %v", stop), func(t *testing.T) {
			svc := newService(t, envoyrls.Config{StopIncrementWhenOverLimit: stop}, fmt.Sprintf(modesDoc, "weirmodes"))
			for i, want := range []uint32{4, 3, 2} {
				if stop && i > 0 {
					want = 4
				}
				resp := modesCall(t, svc, false, "weirmodes", []string{"a", "c"})
				if got := resp.GetStatuses()[1].GetLimitRemaining(); got != want {
					t.Errorf("call %d: c's remaining: got %d, want %d", i+1, got, want)
				}
			}
		})
	}
}
