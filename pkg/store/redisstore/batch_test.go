package redisstore_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/storetest"
	"github.com/weirhq/weir/pkg/algorithm"
)

// batchParams are the rules of the batch tests: every algorithm, and a
// calendar month (whose window the store places for the script).
var batchParams = []algorithm.Params{
	{Algorithm: algorithm.TokenBucket, Limit: 5, Window: time.Second},
	{Algorithm: algorithm.LeakyBucket, Limit: 5, Window: time.Second, Burst: 3},
	{Algorithm: algorithm.FixedWindow, Limit: 5, Window: time.Second},
	{Algorithm: algorithm.FixedWindow, Limit: 5, Window: time.Second, CountRejected: true},
	{Algorithm: algorithm.FixedWindow, Limit: 5, Window: algorithm.MonthWindow, Calendar: algorithm.Month},
	{Algorithm: algorithm.SlidingWindowCounter, Limit: 5, Window: time.Second},
	{Algorithm: algorithm.SlidingWindowLog, Limit: 5, Window: time.Second},
}

// On one Redis node a call of several requests runs them in batch
// scripts (up to 32 requests a script call). Random calls — every
// algorithm, keys repeated within a call, costs of 0 (a peek) to 3,
// refunds, more requests than one batch holds — decide and refund exactly
// as the same requests sent one at a time, in the same order.
func TestBatchDecidesAsOneAtATime(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	batched, single := newStore(t, c, "batched"), newStore(t, c, "single")
	rng := rand.New(rand.NewPCG(7, 11))
	now := storetest.T0
	for call := range 300 {
		now = now.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
		n := 1 + rng.IntN(40)
		if call%50 == 0 {
			n = 70 // three batches in one pipeline
		}
		reqs := make([]algorithm.Request, n)
		for i := range reqs {
			reqs[i] = algorithm.Request{
				Key:    fmt.Sprintf("k%d", rng.IntN(6)),
				Params: batchParams[rng.IntN(len(batchParams))],
				Cost:   int64(rng.IntN(4)),
			}
		}
		if rng.IntN(4) == 0 {
			at := now.Add(-time.Duration(rng.IntN(500)) * time.Millisecond)
			if err := batched.Refund(ctx, at, now, reqs); err != nil {
				t.Fatalf("call %d: batched refund: %v", call, err)
			}
			for i := range reqs {
				if err := single.Refund(ctx, at, now, reqs[i:i+1]); err != nil {
					t.Fatalf("call %d: refund %d alone: %v", call, i, err)
				}
			}
			continue
		}
		got, err := batched.Decide(ctx, now, reqs)
		if err != nil {
			t.Fatalf("call %d: %v", call, err)
		}
		for i := range reqs {
			want, err := single.Decide(ctx, now, reqs[i:i+1])
			if err != nil {
				t.Fatalf("call %d: request %d alone: %v", call, i, err)
			}
			if got[i] != want[0] {
				t.Fatalf("call %d, request %d (%+v): batched %+v, alone %+v", call, i, reqs[i], got[i], want[0])
			}
		}
	}
}

// A batch of 16 admissions of a window counter costs Redis one EVALSHA
// for all 16, and each decision its GET and SET.
func TestBatchCommands(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := newStore(t, c, "cmds")
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	p := algorithm.Params{Algorithm: algorithm.SlidingWindowCounter, Limit: 10, Window: time.Minute}
	reqs := make([]algorithm.Request, 16)
	for i := range reqs {
		reqs[i] = algorithm.Request{Key: fmt.Sprintf("k%d", i), Params: p, Cost: 1}
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := s.Decide(ctx, storetest.T0, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || !r.Allowed {
			t.Fatalf("request %d: got %+v, want admitted", i, r)
		}
	}
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := commandCalls(info)
	delete(got, "config|resetstat")
	if want := map[string]int64{"evalsha": 1, "get": 16, "set": 16}; !maps.Equal(got, want) {
		t.Errorf("got commands %v, want %v", got, want)
	}
}
