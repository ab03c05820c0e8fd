package quota_test

import (
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/dc/quota"
)

// BenchmarkShare measures the hot path with the real clock, among 1,000
// assigned rules of which the one asked has 1,000 keys of its own.
func BenchmarkShare(b *testing.B) {
	tb, err := quota.New(quota.Config{DC: dc, DCs: []string{"a", "b", "c"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	docs := []quota.Change{leasePut(1, time.Now().Add(time.Hour), time.Hour)}
	for i := range 1000 {
		docs = append(docs, put(int64(2+i), "r"+strconv.Itoa(i), 0.4))
	}
	keys := make([]quota.KeyShare, 1000)
	for i := range keys {
		keys[i] = quota.KeyShare{Key: "user-" + strconv.Itoa(i), Share: 0.9}
	}
	docs = append(docs, put(5000, "hot", 0.4, keys...))
	tb.Reset(5000, docs)

	expired, _ := quota.New(quota.Config{DC: dc, DCs: []string{"a", "b", "c"}})
	expired.Reset(10, []quota.Change{put(2, "r1", 0.4)}) // no lease

	cases := []struct {
		name string
		tb   *quota.Table
		rule string
		key  string
		pin  map[string]float64
	}{
		{"assigned", tb, "r1", "user-1", nil},
		{"key share", tb, "hot", "user-500", nil},
		{"key not listed", tb, "hot", "user-5000", nil},
		{"static", tb, "none", "user-1", nil},
		{"static with shares", tb, "none", "user-1", map[string]float64{"a": 0.5, "b": 0.2}},
		{"no lease", expired, "r1", "user-1", nil},
	}
	for _, c := range cases {
		r := globalRule(c.rule, c.pin)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var sum float64
			for b.Loop() {
				sum += c.tb.Share("d", r, c.key)
			}
			if sum < 0 {
				b.Fatal(sum)
			}
		})
	}
	b.Run("parallel", func(b *testing.B) {
		r := globalRule("hot", nil)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				tb.Share("d", r, "user-7")
			}
		})
	})
}
