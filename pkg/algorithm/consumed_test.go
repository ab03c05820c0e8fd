package algorithm_test

import (
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
)

func TestConsumed(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	minute := func(alg algorithm.Algorithm, limit int64) algorithm.Params {
		return algorithm.Params{Algorithm: alg, Limit: limit, Window: time.Minute}
	}
	for _, tc := range []struct {
		name    string
		p       algorithm.Params
		spend   int64 // in one request
		observe int64 // the limit in force when read; 0: p.Limit
		later   time.Duration
		want    int64
		wantOK  bool
	}{
		{"log", minute(algorithm.SlidingWindowLog, 10), 4, 0, 0, 4, true},
		{"log full", minute(algorithm.SlidingWindowLog, 10), 10, 0, 0, 10, true},
		{"log above a shrunk limit", minute(algorithm.SlidingWindowLog, 10), 10, 6, 0, 10, true},
		{"log aged out", minute(algorithm.SlidingWindowLog, 10), 10, 0, time.Minute, 0, true},
		{"fixed full", minute(algorithm.FixedWindow, 10), 10, 0, 0, 10, true},
		{"fixed above a shrunk limit", minute(algorithm.FixedWindow, 10), 9, 2, 0, 9, true},
		{"counter", minute(algorithm.SlidingWindowCounter, 10), 3, 0, 0, 3, true},
		{"counter above a limit of zero", minute(algorithm.SlidingWindowCounter, 10), 7, -1, 0, 7, true},
		{"token bucket, burst in limit units", algorithm.Params{Algorithm: algorithm.TokenBucket, Limit: 100, Window: time.Minute, Burst: 10}, 5, 0, 0, 50, true},
		{"token bucket full", algorithm.Params{Algorithm: algorithm.TokenBucket, Limit: 10, Window: time.Minute}, 10, 0, 0, 10, true},
		{"token bucket half drained", algorithm.Params{Algorithm: algorithm.TokenBucket, Limit: 10, Window: time.Minute}, 10, 0, 30 * time.Second, 5, true},
		{"leaky bucket above a shrunk capacity", algorithm.Params{Algorithm: algorithm.LeakyBucket, Limit: 60, Window: time.Minute, Burst: 10}, 10, 0, 0, 60, true},
		// (5×10^10 of a capacity of 8×10^10) × 10^12 overflows int64 on the
		// way: 62.5% of the limit, not a negative number.
		{"huge bucket", algorithm.Params{Algorithm: algorithm.TokenBucket, Limit: 1_000_000_000_000, Window: 100 * time.Second, Burst: 80_000_000_000}, 50_000_000_000, 0, 0, 625_000_000_000, true},
		{"bucket of capacity zero", algorithm.Params{Algorithm: algorithm.TokenBucket, Limit: 10, Window: time.Minute}, 4, -1, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, s := algorithm.Decide(tc.p, algorithm.State{}, at, tc.spend) // one request
			if !d.Allowed {
				t.Fatalf("spending %d: rejected", tc.spend)
			}
			p := tc.p
			switch {
			case tc.observe > 0:
				p.Limit = tc.observe
			case tc.observe < 0:
				p.Limit = 0
			}
			d, _ = algorithm.Decide(p, s, at.Add(tc.later), 0)
			got, ok := algorithm.Consumed(p, d)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("got %d, %v, want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
