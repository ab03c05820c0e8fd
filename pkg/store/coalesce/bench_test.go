package coalesce_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/store/coalesce"
	"github.com/weirhq/weir/pkg/store/memstore"
)

// BenchmarkDecideOn is the coalescer's cost in front of the memory store:
// about 50 callers, each call under the limiter's kind of bound and with
// a context of its own (as a gRPC handler's).
func BenchmarkDecideOn(b *testing.B) {
	m, err := memstore.New(memstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	c := newCoalescer(b, m, coalesce.Config{Workers: 1})
	p := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 1 << 40, Window: time.Minute}
	b.SetParallelism(max(1, 50/runtime.GOMAXPROCS(0))) // about 50 callers
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		reqs := make([]algorithm.Request, 1)
		for i := 0; pb.Next(); i++ {
			reqs[0] = algorithm.Request{Key: strconv.Itoa(i % 1000), Params: p, Cost: 1}
			ctx, cancel := context.WithCancel(context.Background())
			_, err := c.DecideOn(ctx, "", 20*time.Millisecond, time.Now(), reqs)
			cancel()
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}
