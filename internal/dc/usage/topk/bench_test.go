package topk_test

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/weirhq/weir/internal/dc/usage/topk"
)

// BenchmarkAdd measures Add on streams of user-id-like keys.
func BenchmarkAdd(b *testing.B) {
	for _, bc := range []struct {
		name string
		keys int
		zipf bool
	}{
		{"zipf-10k-keys", 10_000, true},
		{"uniform-1M-keys", 1_000_000, false},
		{"uniform-32-keys", 32, false},
	} {
		for _, k := range []int{64, 1024} {
			b.Run(bc.name+"/k="+strconv.Itoa(k), func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 2))
				z := rand.NewZipf(r, 1.2, 1, uint64(bc.keys-1))
				stream := make([]string, 1<<16)
				for i := range stream {
					var n uint64
					if bc.zipf {
						n = z.Uint64()
					} else {
						n = r.Uint64N(uint64(bc.keys))
					}
					stream[i] = "user-" + strconv.FormatUint(n, 10)
				}
				s, err := topk.New(k)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					s.Add(stream[i&(len(stream)-1)], 1)
					i++
				}
			})
		}
	}
}
