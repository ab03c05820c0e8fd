package memstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/storetest"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/store/memstore"
)

// BenchmarkDecide measures one decision on one hot key, and on keys spread
// over 100 k, per algorithm.
func BenchmarkDecide(b *testing.B) {
	ctx := context.Background()
	for _, a := range algorithm.All {
		p := algorithm.Params{Algorithm: a, Limit: 1000, Window: time.Second}
		b.Run(a.String()+"/hot", func(b *testing.B) {
			s := newStore(b, memstore.Config{})
			reqs := []algorithm.Request{{Key: "rule/hot", Params: p, Cost: 1}}
			now := storetest.T0
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Millisecond)
				if _, err := s.Decide(ctx, now, reqs); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(a.String()+"/100k-keys", func(b *testing.B) {
			s := newStore(b, memstore.Config{})
			keys := make([]string, 100_000)
			for i := range keys {
				keys[i] = "rule/" + strconv.Itoa(i)
			}
			reqs := []algorithm.Request{{Params: p, Cost: 1}}
			now := storetest.T0
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				now = now.Add(time.Microsecond)
				reqs[0].Key = keys[i%len(keys)]
				if _, err := s.Decide(ctx, now, reqs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecideParallel has every core decide at once over the same 4,096
// keys, showing how the sharded locks hold up under contention.
func BenchmarkDecideParallel(b *testing.B) {
	s := newStore(b, memstore.Config{})
	p := algorithm.Params{Algorithm: algorithm.SlidingWindowCounter, Limit: 1000, Window: time.Second}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		reqs := []algorithm.Request{{Params: p, Cost: 1}}
		i := 0
		for pb.Next() {
			i++
			reqs[0].Key = "k" + strconv.Itoa(i%4096)
			if _, err := s.Decide(context.Background(), storetest.T0, reqs); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
