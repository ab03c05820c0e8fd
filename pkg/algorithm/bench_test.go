package algorithm_test

import (
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
)

func BenchmarkDecide(b *testing.B) {
	for _, a := range algorithm.All {
		b.Run(a.String(), func(b *testing.B) {
			p := algorithm.Params{Algorithm: a, Limit: 1000, Window: time.Second}
			var s algorithm.State
			now := t0
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				// 1 ms per request: each key stays near its limit.
				now = now.Add(time.Millisecond)
				_, s = algorithm.Decide(p, s, now, 1)
			}
		})
	}
}
