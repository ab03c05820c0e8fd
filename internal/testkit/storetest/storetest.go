// Package storetest is the conformance suite every rate-limit store must
// pass: the same table of decisions, with a fake clock, for all five
// algorithms, plus property tests that drive random traffic and check each
// algorithm's documented bound over every window.
//
// A store's test calls Run with a function that returns an empty store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, "memory", func(t *testing.T) storetest.Store { ... })
//	}
//
// Subtests are named <store>/<algorithm>/<case>.
package storetest

import (
	"context"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
)

// Store is what the suite exercises; both memstore.Store and
// redisstore.Store implement it.
type Store interface {
	// Decide decides every request at now. A non-nil error means nothing
	// was decided; per-request errors are in the Results.
	Decide(ctx context.Context, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error)
	// Refund gives back the cost of requests admitted at time at.
	Refund(ctx context.Context, at, now time.Time, reqs []algorithm.Request) error
}

// T0 is the suite's fake epoch: a midnight, so windows of a second, a
// minute or an hour start there.
var T0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// step is one call in a vector: at T0+At, a request of Cost on the vector's
// key (or a refund of a request admitted at T0+RefundAt), and the decision
// expected.
type step struct {
	At     int64 // ms after T0
	Cost   int64
	Refund bool  // refund Cost admitted at RefundAt instead of deciding
	RefAt  int64 // ms after T0 of the refunded admission
	Key    string
	Want   want
}

type want struct {
	Allowed    bool
	Remaining  int64
	ResetAt    int64 // ms after T0
	RetryAfter int64 // ms
}

type vector struct {
	name   string
	params algorithm.Params
	steps  []step
}

func params(a algorithm.Algorithm, limit int64, window time.Duration, burst int64) algorithm.Params {
	return algorithm.Params{Algorithm: a, Limit: limit, Window: window, Burst: burst}
}

// countRejected returns p with CountRejected set.
func countRejected(p algorithm.Params) algorithm.Params {
	p.CountRejected = true
	return p
}

// vectors are worked by hand in docs/algorithms.md's terms; every figure is
// what the algorithm's definition gives, not what an implementation did.
var vectors = map[algorithm.Algorithm][]vector{
	algorithm.TokenBucket: {
		{"refill", params(algorithm.TokenBucket, 5, 10*time.Second, 0), []step{
			{At: 0, Cost: 1, Want: want{true, 4, 2000, 0}},
			{At: 0, Cost: 4, Want: want{true, 0, 10000, 0}},
			{At: 0, Cost: 1, Want: want{false, 0, 10000, 2000}},
			{At: 1000, Cost: 1, Want: want{false, 0, 10000, 1000}},
			{At: 2000, Cost: 1, Want: want{true, 0, 12000, 0}},
			{At: 2000, Cost: 6, Want: want{false, 0, 12000, 10000}}, // above capacity: never
			{At: 7000, Cost: 0, Want: want{true, 2, 12000, 0}},      // peek
			{At: 30000, Cost: 0, Want: want{true, 5, 30000, 0}},
		}},
		{"burst above limit", params(algorithm.TokenBucket, 2, time.Second, 4), []step{
			{At: 0, Cost: 4, Want: want{true, 0, 2000, 0}},
			{At: 0, Cost: 1, Want: want{false, 0, 2000, 500}},
			{At: 499, Cost: 1, Want: want{false, 0, 2000, 1}},
			{At: 500, Cost: 1, Want: want{true, 0, 2500, 0}},
		}},
		{"refund", params(algorithm.TokenBucket, 3, 3*time.Second, 0), []step{
			{At: 0, Cost: 3, Want: want{true, 0, 3000, 0}},
			{At: 10, Refund: true, RefAt: 0, Cost: 2},
			// 10ms after admission the request holds 2 tokens less what
			// drained since: 6000 - 30 units.
			{At: 10, Cost: 0, Want: want{true, 2, 1010, 0}},
			{At: 10, Refund: true, RefAt: 0, Cost: 5}, // more than taken: capped
			{At: 10, Cost: 3, Want: want{true, 0, 3010, 0}},
		}},
		{"refund of a drained request gives nothing", params(algorithm.TokenBucket, 10, time.Second, 0), []step{
			{At: 0, Cost: 10, Want: want{true, 0, 1000, 0}},
			{At: 1000, Cost: 10, Want: want{true, 0, 2000, 0}},
			{At: 1000, Refund: true, RefAt: 0, Cost: 10},
			{At: 1000, Cost: 1, Want: want{false, 0, 2000, 100}},
			{At: 1000, Refund: true, RefAt: 500, Cost: 10}, // half drained: 5 back
			{At: 1000, Cost: 5, Want: want{true, 0, 2000, 0}},
		}},
		{"zero limit", params(algorithm.TokenBucket, 0, time.Second, 0), []step{
			{At: 0, Cost: 1, Want: want{false, 0, 0, 1000}},
			{At: 0, Cost: 0, Want: want{true, 0, 0, 0}},
		}},
	},
	algorithm.LeakyBucket: {
		{"paced", params(algorithm.LeakyBucket, 5, 10*time.Second, 0), []step{
			{At: 0, Cost: 1, Want: want{true, 0, 2000, 0}},
			{At: 500, Cost: 1, Want: want{false, 0, 2000, 1500}},
			{At: 2000, Cost: 1, Want: want{true, 0, 4000, 0}},
			{At: 2000, Cost: 2, Want: want{false, 0, 4000, 10000}}, // above capacity 1
			{At: 5000, Cost: 0, Want: want{true, 1, 5000, 0}},
		}},
		{"burst", params(algorithm.LeakyBucket, 10, time.Second, 3), []step{
			{At: 0, Cost: 1, Want: want{true, 2, 100, 0}},
			{At: 0, Cost: 2, Want: want{true, 0, 300, 0}},
			{At: 50, Cost: 1, Want: want{false, 0, 300, 50}},
			{At: 100, Cost: 1, Want: want{true, 0, 400, 0}},
		}},
		{"refund", params(algorithm.LeakyBucket, 1, time.Second, 2), []step{
			{At: 0, Cost: 2, Want: want{true, 0, 2000, 0}},
			{At: 0, Refund: true, RefAt: 0, Cost: 1},
			{At: 0, Cost: 1, Want: want{true, 0, 2000, 0}},
			{At: 0, Cost: 1, Want: want{false, 0, 2000, 1000}},
		}},
	},
	algorithm.FixedWindow: {
		{"window", params(algorithm.FixedWindow, 3, time.Minute, 0), []step{
			{At: 1000, Cost: 1, Want: want{true, 2, 60000, 0}},
			{At: 2000, Cost: 2, Want: want{true, 0, 60000, 0}},
			{At: 3000, Cost: 1, Want: want{false, 0, 60000, 57000}},
			{At: 59999, Cost: 1, Want: want{false, 0, 60000, 1}},
			{At: 60000, Cost: 3, Want: want{true, 0, 120000, 0}},
			{At: 61000, Cost: 4, Want: want{false, 0, 120000, 60000}}, // above limit: never
			{At: 61000, Refund: true, RefAt: 60000, Cost: 1},
			{At: 61000, Refund: true, RefAt: 59000, Cost: 1}, // old window: nothing
			{At: 62000, Cost: 1, Want: want{true, 0, 120000, 0}},
			{At: 62000, Cost: 1, Want: want{false, 0, 120000, 58000}},
			// A limiter whose clock is behind counts into the later window.
			{At: 59500, Cost: 1, Want: want{false, 0, 120000, 60500}},
			{At: 200000, Cost: 0, Want: want{true, 3, 200000, 0}},
		}},
		// T0 is 22 November 2026: its month ends 9 days later, on 1
		// December (777,600,000 ms); then 1 January 2027 (+31 days), 1
		// February (+31), 1 March (+28).
		{"calendar month", algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 3, Window: algorithm.MonthWindow, Calendar: algorithm.Month}, []step{
			{At: 0, Cost: 2, Want: want{true, 1, 777600000, 0}},
			{At: 1000, Cost: 2, Want: want{false, 1, 777600000, 777599000}},
			{At: 777599999, Cost: 1, Want: want{true, 0, 777600000, 0}},
			{At: 777600000, Cost: 3, Want: want{true, 0, 3456000000, 0}},
			{At: 777601000, Refund: true, RefAt: 777599999, Cost: 1}, // November's: nothing
			{At: 777601000, Refund: true, RefAt: 777600000, Cost: 1},
			{At: 777602000, Cost: 1, Want: want{true, 0, 3456000000, 0}},
			{At: 777602000, Cost: 1, Want: want{false, 0, 3456000000, 2678398000}},
			{At: 6134400000, Cost: 0, Want: want{true, 3, 6134400000, 0}},
			{At: 6134400001, Cost: 3, Want: want{true, 0, 8553600000, 0}},
			{At: 8553599999, Cost: 1, Want: want{false, 0, 8553600000, 1}},
		}},
		// Rejections counted, as envoyproxy/ratelimit counts (Envoy-format
		// rules): a rejected cost is taken too, so the window stays over
		// its limit, and a peek (cost 0) after it is rejected as well —
		// also when the rejection was the key's first write, the fresh
		// key's state being created by it.
		{"rejections counted at a limit of zero", countRejected(params(algorithm.FixedWindow, 0, time.Minute, 0)), []step{
			{At: 1000, Cost: 0, Want: want{true, 0, 1000, 0}},       // peek at a fresh key
			{At: 2000, Cost: 1, Want: want{false, 0, 60000, 58000}}, // rejected, counted: 1
			{At: 3000, Cost: 0, Want: want{false, 0, 60000, 57000}}, // 1 > 0: over
			{At: 4000, Cost: 0, Want: want{false, 0, 60000, 56000}},
			{At: 60000, Cost: 0, Want: want{true, 0, 60000, 0}}, // the next window
		}},
		{"rejections counted on a fresh key", countRejected(params(algorithm.FixedWindow, 2, time.Minute, 0)), []step{
			{At: 1000, Cost: 3, Want: want{false, 0, 60000, 59000}}, // above the limit, counted: 3
			{At: 2000, Cost: 0, Want: want{false, 0, 60000, 58000}},
			{At: 3000, Cost: 1, Want: want{false, 0, 60000, 57000}}, // counted: 4
			{At: 60000, Cost: 2, Want: want{true, 0, 120000, 0}},
			{At: 61000, Cost: 1, Want: want{false, 0, 120000, 59000}}, // counted: 3
			{At: 61000, Refund: true, RefAt: 60000, Cost: 2},
			{At: 62000, Cost: 0, Want: want{true, 1, 120000, 0}}, // 1 left counted
		}},
	},
	algorithm.SlidingWindowCounter: {
		{"weighted previous window", params(algorithm.SlidingWindowCounter, 10, 10*time.Second, 0), []step{
			{At: 0, Cost: 5, Want: want{true, 5, 20000, 0}},
			{At: 9000, Cost: 5, Want: want{true, 0, 20000, 0}},
			{At: 9500, Cost: 1, Want: want{false, 0, 20000, 1500}},
			{At: 12000, Cost: 1, Want: want{true, 1, 30000, 0}},
			{At: 12000, Cost: 2, Want: want{false, 1, 30000, 1000}},
			{At: 12000, Cost: 11, Want: want{false, 1, 30000, 10000}}, // above limit: never
			{At: 25000, Cost: 0, Want: want{true, 9, 30000, 0}},
			{At: 45000, Cost: 0, Want: want{true, 10, 45000, 0}},
		}},
		{"seed 001 example", params(algorithm.SlidingWindowCounter, 40, 100*time.Second, 0), []step{
			// Seed 001's worked example, with the previous window holding
			// the 40 a limit of 40 lets through (not 50).
			{At: 10000, Cost: 40, Want: want{true, 0, 200000, 0}},
			// 41% into the next window: ceil(0.59*40) = 24 estimated.
			{At: 141000, Cost: 5, Want: want{true, 11, 300000, 0}},
			{At: 141000, Cost: 12, Want: want{false, 11, 300000, 1500}},
		}},
		{"refund both windows", params(algorithm.SlidingWindowCounter, 4, time.Second, 0), []step{
			{At: 900, Cost: 4, Want: want{true, 0, 2000, 0}},
			{At: 1000, Cost: 1, Want: want{false, 0, 2000, 250}},
			{At: 1000, Refund: true, RefAt: 900, Cost: 2},
			{At: 1000, Cost: 2, Want: want{true, 0, 3000, 0}},
			{At: 1000, Refund: true, RefAt: 1000, Cost: 1},
			{At: 1000, Cost: 0, Want: want{true, 1, 3000, 0}},
		}},
	},
	algorithm.SlidingWindowLog: {
		{"log", params(algorithm.SlidingWindowLog, 3, 10*time.Second, 0), []step{
			{At: 0, Cost: 1, Want: want{true, 2, 10000, 0}},
			{At: 1000, Cost: 1, Want: want{true, 1, 11000, 0}},
			{At: 2000, Cost: 1, Want: want{true, 0, 12000, 0}},
			{At: 3000, Cost: 1, Want: want{false, 0, 12000, 7000}},
			{At: 3000, Cost: 2, Want: want{false, 0, 12000, 8000}},
			{At: 9999, Cost: 1, Want: want{false, 0, 12000, 1}},
			{At: 10000, Cost: 1, Want: want{true, 0, 20000, 0}},
			{At: 10000, Cost: 4, Want: want{false, 0, 20000, 10000}}, // above limit: never
			{At: 10000, Refund: true, RefAt: 10000, Cost: 1},
			{At: 10500, Cost: 1, Want: want{true, 0, 20500, 0}},
			{At: 40000, Cost: 0, Want: want{true, 3, 40000, 0}},
		}},
		{"cost above one", params(algorithm.SlidingWindowLog, 5, time.Second, 0), []step{
			{At: 0, Cost: 3, Want: want{true, 2, 1000, 0}},
			{At: 100, Cost: 2, Want: want{true, 0, 1100, 0}},
			{At: 200, Cost: 4, Want: want{false, 0, 1100, 900}},
			{At: 1000, Cost: 3, Want: want{true, 0, 2000, 0}},
			{At: 1000, Refund: true, RefAt: 1000, Cost: 2},
			{At: 1000, Refund: true, RefAt: 100, Cost: 2},
			{At: 1000, Cost: 0, Want: want{true, 4, 2000, 0}},
		}},
	},
}
