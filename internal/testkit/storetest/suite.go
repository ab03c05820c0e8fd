package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
)

// Run runs the whole suite against the stores newStore returns; each call
// must return an empty store (or one whose keys cannot collide with any
// earlier call's).
func Run(t *testing.T, store string, newStore func(t *testing.T) Store) {
	t.Run(store, func(t *testing.T) {
		for _, a := range algorithm.All {
			t.Run(a.String(), func(t *testing.T) {
				for _, v := range vectors[a] {
					t.Run(v.name, func(t *testing.T) { runVector(t, newStore(t), v) })
				}
				t.Run("matches the pure algorithm", func(t *testing.T) { testModel(t, newStore(t), modelParams(a), "model") })
				t.Run("matches the pure algorithm at small limits, rejections counted", func(t *testing.T) {
					s := newStore(t)
					for _, limit := range []int64{0, 1, 2} {
						p := modelParams(a)
						p.Limit, p.CountRejected = limit, true
						testModel(t, s, p, fmt.Sprintf("model-%d", limit))
					}
				})
				t.Run("bound over every window", func(t *testing.T) { testBound(t, newStore(t), a) })
				t.Run("concurrent callers", func(t *testing.T) { testConcurrent(t, newStore(t), a) })
				if a.IsBucket() {
					t.Run("fill kept at a limit of zero", func(t *testing.T) { testBucketAtZero(t, newStore(t), a) })
				}
			})
		}
		t.Run("batch", func(t *testing.T) { testBatch(t, newStore(t)) })
		t.Run("invalid requests", func(t *testing.T) { testInvalid(t, newStore(t)) })
		t.Run("algorithm change starts afresh", func(t *testing.T) { testAlgorithmChange(t, newStore(t)) })
		t.Run("keys are independent", func(t *testing.T) { testKeys(t, newStore(t)) })
	})
}

func at(ms int64) time.Time { return T0.Add(time.Duration(ms) * time.Millisecond) }

func decideOne(t *testing.T, s Store, now time.Time, r algorithm.Request) algorithm.Decision {
	t.Helper()
	res, err := s.Decide(context.Background(), now, []algorithm.Request{r})
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	if len(res) != 1 {
		t.Fatalf("Decide returned %d results, want 1", len(res))
	}
	if res[0].Err != nil {
		t.Fatalf("Decide: %v", res[0].Err)
	}
	return res[0].Decision
}

func runVector(t *testing.T, s Store, v vector) {
	for i, st := range v.steps {
		key := st.Key
		if key == "" {
			key = "vector/" + v.name
		}
		r := algorithm.Request{Key: key, Params: v.params, Cost: st.Cost}
		if st.Refund {
			if err := s.Refund(context.Background(), at(st.RefAt), at(st.At), []algorithm.Request{r}); err != nil {
				t.Fatalf("step %d: Refund: %v", i, err)
			}
			continue
		}
		d := decideOne(t, s, at(st.At), r)
		got := want{d.Allowed, d.Remaining, d.ResetAt.Sub(T0).Milliseconds(), d.RetryAfter.Milliseconds()}
		if got != st.Want {
			t.Errorf("step %d (t=%dms cost %d): got %+v, want %+v", i, st.At, st.Cost, got, st.Want)
		}
		if d.Limit != v.params.Capacity() {
			t.Errorf("step %d: got limit %d, want %d", i, d.Limit, v.params.Capacity())
		}
	}
}

// modelParams are the parameters the random tests use per algorithm.
func modelParams(a algorithm.Algorithm) algorithm.Params {
	switch a {
	case algorithm.TokenBucket:
		return params(a, 7, time.Second, 0)
	case algorithm.LeakyBucket:
		return params(a, 7, time.Second, 3)
	default:
		return params(a, 7, time.Second, 0)
	}
}

// testModel drives random traffic (costs 0-3, refunds, a clock that
// sometimes steps back, a limit that shrinks and grows as a DC's share
// does) on key, from p, and checks that every decision equals the pure
// algorithm's, so a store's own implementation (a Lua script) cannot
// drift from package algorithm — Decision.Used above a shrunk limit
// included. At small limits most costs are rejected, the first on a
// fresh key: with Params.CountRejected a FixedWindow counts them, and a
// store must keep what it counted even when nothing was admitted (a peek
// after it is rejected too).
func testModel(t *testing.T, s Store, p algorithm.Params, key string) {
	a := p.Algorithm
	rng := rand.New(rand.NewPCG(uint64(a), 42))
	base := p.Limit
	var st algorithm.State
	now := int64(0)
	var admitted []int64 // times of admissions with cost, for refunds
	for i := range 300 {
		if !a.IsBucket() && rng.IntN(25) == 0 {
			// Not the buckets': a store settles a bucket's drain only when
			// it writes, so after a change of rate it drains the time since
			// its last write at the new rate, where the pure algorithm
			// drains up to every observation at the old one.
			p.Limit = []int64{base, base / 2, 2 * base}[rng.IntN(3)]
		}
		now += int64(rng.IntN(120))
		t0 := now
		if rng.IntN(20) == 0 {
			t0 -= int64(rng.IntN(50)) // another limiter's clock, slightly behind
		}
		cost := int64(rng.IntN(4))
		r := algorithm.Request{Key: key, Params: p, Cost: cost}
		if len(admitted) > 0 && rng.IntN(8) == 0 {
			ref := admitted[rng.IntN(len(admitted))]
			r.Cost = 1
			if err := s.Refund(context.Background(), at(ref), at(t0), []algorithm.Request{r}); err != nil {
				t.Fatalf("request %d: Refund: %v", i, err)
			}
			st = algorithm.Refund(p, st, at(ref), at(t0), 1)
			continue
		}
		wantD, next := algorithm.Decide(p, st, at(t0), cost)
		st = next
		got := decideOne(t, s, at(t0), r)
		if !got.ResetAt.Equal(wantD.ResetAt) {
			t.Fatalf("request %d (t=%dms cost %d): reset at %v, want %v", i, t0, cost, got.ResetAt, wantD.ResetAt)
		}
		got.ResetAt = wantD.ResetAt // the same instant, maybe in another location
		if got != wantD {
			t.Fatalf("request %d (t=%dms cost %d): got %+v, want %+v", i, t0, cost, got, wantD)
		}
		if got.Allowed && cost > 0 {
			admitted = append(admitted, t0)
		}
	}
}

// testBucketAtZero fills a bucket, brings its limit to 0 (a DC that gave
// up its share), refunds part of it there and reads it, then gives the
// limit back: every decision must equal the pure algorithm's. A bucket at
// a limit of 0 does not drain, so its fill is no fresh state: a store that
// forgot it there (memstore took it as expired at once; the Redis script
// deleted the key when a refund wrote it) let the DC admit its whole
// capacity again on growing back. A store may forget it once it would
// have drained at its last positive rate (algorithm.Expiry), so the steps
// stay within that: 1 s for a full bucket of 10 per second.
func testBucketAtZero(t *testing.T, s Store, a algorithm.Algorithm) {
	p := params(a, 10, time.Second, 10)
	var st algorithm.State
	for i, step := range []struct {
		at, limit, cost int64
		refundAt        int64 // ≥ 0: refund cost admitted then instead of deciding
	}{
		{0, 10, 10, -1},  // full
		{100, 0, 0, -1},  // the limit falls to 0: read
		{150, 0, 1, 0},   // a refund there writes the state
		{200, 0, 0, -1},  // read again: 9 still held
		{800, 0, 0, -1},  // still 9: nothing drains at 0
		{900, 10, 0, -1}, // the limit comes back: 100 ms of drain, 8 held
		{900, 10, 3, -1}, // room for 2, not 3
		{900, 10, 2, -1},
	} {
		p.Limit = step.limit
		r := algorithm.Request{Key: "zero", Params: p, Cost: step.cost}
		if step.refundAt >= 0 {
			if err := s.Refund(context.Background(), at(step.refundAt), at(step.at), []algorithm.Request{r}); err != nil {
				t.Fatalf("step %d: Refund: %v", i, err)
			}
			st = algorithm.Refund(p, st, at(step.refundAt), at(step.at), step.cost)
			continue
		}
		want, next := algorithm.Decide(p, st, at(step.at), step.cost)
		st = next
		got := decideOne(t, s, at(step.at), r)
		got.ResetAt = want.ResetAt
		if got != want {
			t.Fatalf("step %d (t=%dms, limit %d, cost %d): got %+v, want %+v", i, step.at, step.limit, step.cost, got, want)
		}
	}
}

// bound returns the most cost algorithm a may admit in any window of
// length p.Window, as docs/algorithms.md states it.
func bound(p algorithm.Params) int64 {
	switch p.Algorithm {
	case algorithm.TokenBucket, algorithm.LeakyBucket:
		return p.Capacity() + p.Limit
	case algorithm.FixedWindow:
		return 2 * p.Limit
	case algorithm.SlidingWindowCounter:
		return 2*p.Limit - 1
	default:
		return p.Limit
	}
}

// testBound sends bursts of random traffic well above the limit and checks,
// for every window ending at an admission, that the admitted cost stays
// within the algorithm's bound; for the exact log also that the bound is
// reached (the limiter is not merely over-strict).
func testBound(t *testing.T, s Store, a algorithm.Algorithm) {
	rng := rand.New(rand.NewPCG(uint64(a), 7))
	p := algorithm.Params{Algorithm: a, Limit: 10, Window: time.Second, Burst: 5}
	w := p.Window.Milliseconds()
	type adm struct{ t, cost int64 }
	var log []adm
	now := int64(0)
	for range 600 {
		// Bursts near window edges are the worst case for window counters.
		if rng.IntN(10) == 0 {
			now += w - now%w - int64(rng.IntN(5)) + int64(rng.IntN(10))
		} else {
			now += int64(rng.IntN(40))
		}
		cost := int64(1 + rng.IntN(2))
		d := decideOne(t, s, at(now), algorithm.Request{Key: "bound", Params: p, Cost: cost})
		if d.Allowed {
			log = append(log, adm{now, cost})
		}
	}
	var worst int64
	for i, end := range log {
		var sum int64
		for j := i; j >= 0 && log[j].t > end.t-w; j-- {
			sum += log[j].cost
		}
		worst = max(worst, sum)
	}
	if b := bound(p); worst > b {
		t.Fatalf("admitted %d in one window of %v, bound %d", worst, p.Window, b)
	}
	if worst < p.Limit {
		t.Fatalf("admitted at most %d in any window under heavy load, want at least the limit %d", worst, p.Limit)
	}
	t.Logf("most admitted in one window: %d (limit %d, bound %d)", worst, p.Limit, bound(p))
}

// testConcurrent has many goroutines spend on one key at one instant: the
// total admitted must be exactly the capacity, never more.
func testConcurrent(t *testing.T, s Store, a algorithm.Algorithm) {
	p := algorithm.Params{Algorithm: a, Limit: 100, Window: time.Hour, Burst: 100}
	now := at(1000)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for range 20 {
				res, err := s.Decide(context.Background(), now, []algorithm.Request{{Key: "hot", Params: p, Cost: 1}})
				if err != nil || res[0].Err != nil {
					t.Errorf("goroutine %d: %v %v", g, err, res)
					return
				}
				if res[0].Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != p.Capacity() {
		t.Fatalf("admitted %d of 320 concurrent requests, want exactly %d", got, p.Capacity())
	}
}

func testBatch(t *testing.T, s Store) {
	var reqs []algorithm.Request
	for _, a := range algorithm.All {
		reqs = append(reqs, algorithm.Request{Key: "batch", Params: params(a, 2, time.Second, 0), Cost: 1})
	}
	// The same key and algorithm twice in one batch: decided in order.
	reqs = append(reqs, reqs[len(reqs)-1], reqs[len(reqs)-1])
	res, err := s.Decide(context.Background(), at(0), reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(reqs) {
		t.Fatalf("got %d results, want %d", len(res), len(reqs))
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("result %d: %v", i, r.Err)
		}
		wantAllowed := true
		switch {
		case i == 1: // LeakyBucket capacity 1: admitted
		case i == len(res)-1: // third on a limit of 2
			wantAllowed = false
		}
		if r.Allowed != wantAllowed {
			t.Errorf("result %d (%s): got allowed=%v, want %v", i, reqs[i].Params.Algorithm, r.Allowed, wantAllowed)
		}
	}
}

func testInvalid(t *testing.T, s Store) {
	good := algorithm.Request{Key: "ok", Params: params(algorithm.FixedWindow, 1, time.Second, 0), Cost: 1}
	bad := []algorithm.Request{
		{Key: "", Params: good.Params, Cost: 1},
		{Key: string(make([]byte, algorithm.MaxKeyLen+1)), Params: good.Params, Cost: 1},
		{Key: "k", Params: good.Params, Cost: -1},
		{Key: "k", Params: algorithm.Params{Algorithm: 0, Limit: 1, Window: time.Second}, Cost: 1},
		{Key: "k", Params: algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 1}, Cost: 1},
		{Key: "k", Params: algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: -1, Window: time.Second}, Cost: 1},
		{Key: "k", Params: algorithm.Params{Algorithm: algorithm.TokenBucket, Limit: 1, Window: time.Hour, Burst: algorithm.MaxLimit}, Cost: 1},
	}
	res, err := s.Decide(context.Background(), at(0), append(bad, good))
	if err != nil {
		t.Fatal(err)
	}
	for i := range bad {
		if !errors.Is(res[i].Err, algorithm.ErrInvalidRequest) {
			t.Errorf("request %d: got error %v, want ErrInvalidRequest", i, res[i].Err)
		}
	}
	if last := res[len(bad)]; last.Err != nil || !last.Allowed {
		t.Errorf("valid request beside invalid ones: got %+v, want allowed", last)
	}
	if err := s.Refund(context.Background(), at(0), at(0), bad[:1]); !errors.Is(err, algorithm.ErrInvalidRequest) {
		t.Errorf("Refund of an invalid request: got %v, want ErrInvalidRequest", err)
	}
}

func testAlgorithmChange(t *testing.T, s Store) {
	for _, a := range algorithm.All {
		r := algorithm.Request{Key: "changing", Params: params(a, 1, time.Hour, 0), Cost: 1}
		if d := decideOne(t, s, at(0), r); !d.Allowed {
			t.Errorf("%s after other algorithms on the same key: got rejected, want a fresh key", a)
		}
		if d := decideOne(t, s, at(0), r); d.Allowed {
			t.Errorf("%s second request: got allowed, want rejected", a)
		}
	}
}

func testKeys(t *testing.T, s Store) {
	p := params(algorithm.SlidingWindowCounter, 1, time.Minute, 0)
	keys := []string{"a", "b", "{braced}", "}", "%7B", "with space", "ünïcode", "a/b:c"}
	for round, wantAllowed := range []bool{true, false} {
		for _, k := range keys {
			d := decideOne(t, s, at(0), algorithm.Request{Key: k, Params: p, Cost: 1})
			if d.Allowed != wantAllowed {
				t.Errorf("round %d key %q: got allowed=%v, want %v", round, k, d.Allowed, wantAllowed)
			}
		}
	}
}
