package algorithm_test

import (
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
)

func TestConsumed(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		name   string
		p      algorithm.Params
		spend  int64
		want   int64
		wantOK bool
	}{
		{"log", algorithm.Params{Algorithm: algorithm.SlidingWindowLog, Limit: 10, Window: time.Minute}, 4, 4, true},
		{"fixed full", algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 10, Window: time.Minute}, 10, 0, false},
		{"counter", algorithm.Params{Algorithm: algorithm.SlidingWindowCounter, Limit: 10, Window: time.Minute}, 3, 3, true},
		{"token bucket, burst in limit units", algorithm.Params{Algorithm: algorithm.TokenBucket, Limit: 100, Window: time.Minute, Burst: 10}, 5, 50, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s algorithm.State
			for range tc.spend {
				_, s = algorithm.Decide(tc.p, s, at, 1)
			}
			d, _ := algorithm.Decide(tc.p, s, at, 0)
			got, ok := algorithm.Consumed(tc.p, d)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("got %d, %v, want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
