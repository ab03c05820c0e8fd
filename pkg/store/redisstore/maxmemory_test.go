package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/storetest"
	"github.com/weirhq/weir/pkg/algorithm"
)

// TestDecideAtMaxmemory: at maxmemory under noeviction, a decision whose
// script's first write would grow memory is refused with Redis's OOM
// error, alone or in a batch script. Redis lets a script that has written
// already write on (SlidingWindowLog's first removes expired entries,
// which grows nothing; in a batch, the decisions after it then write
// too), and those decisions are made and counted. Either way no decision
// is admitted without being counted: once the cap is lifted, each key's
// next decision finds exactly the hits admitted before.
func TestDecideAtMaxmemory(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	c := srv.Client(t)
	ctx := context.Background()
	s := newStore(t, c, "oom")
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	const limit = 5
	var reqs []algorithm.Request
	for _, a := range []algorithm.Algorithm{algorithm.TokenBucket, algorithm.LeakyBucket, algorithm.FixedWindow, algorithm.SlidingWindowLog, algorithm.SlidingWindowCounter} {
		reqs = append(reqs, algorithm.Request{Key: "k-" + a.String(), Params: algorithm.Params{Algorithm: a, Limit: limit, Burst: limit, Window: time.Minute}, Cost: 1})
	}
	// Used memory above the cap: 2 MB held, then a cap of 1 MB.
	filler := strings.Repeat("x", 512<<10)
	for i := range 4 {
		if err := c.Set(ctx, "filler-"+strconv.Itoa(i), filler, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ConfigSet(ctx, "maxmemory", "1mb").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "probe", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("a write at maxmemory: got %v, want Redis's OOM refusal", err)
	}

	admitted := map[string]int64{}
	refused := map[algorithm.Algorithm]bool{}
	for _, tc := range []struct {
		name  string
		calls [][]algorithm.Request
	}{
		{"alone", [][]algorithm.Request{reqs[:1], reqs[1:2], reqs[2:3], reqs[3:4], reqs[4:5]}},
		{"in a batch script", [][]algorithm.Request{reqs}},
	} {
		for _, call := range tc.calls {
			res, err := s.Decide(ctx, storetest.T0, call)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			for i, r := range res {
				a := call[i].Params.Algorithm
				switch {
				case r.Err != nil && strings.Contains(r.Err.Error(), "OOM"):
					refused[a] = true
				case r.Err != nil:
					t.Errorf("%s, %s at maxmemory: got error %v, want Redis's OOM error or a decision", tc.name, a, r.Err)
				case r.Allowed:
					admitted[call[i].Key]++
				}
			}
		}
	}
	// Which algorithms Redis refuses depends on their scripts' first
	// write: the counters' and buckets' grow memory.
	for _, a := range []algorithm.Algorithm{algorithm.TokenBucket, algorithm.LeakyBucket, algorithm.FixedWindow} {
		if !refused[a] {
			t.Errorf("%s at maxmemory: never refused, want Redis's OOM error alone", a)
		}
	}

	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := s.Decide(ctx, storetest.T0, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		want := limit - admitted[reqs[i].Key] - 1
		if r.Err != nil || !r.Allowed || r.Remaining != want {
			t.Errorf("%s once the cap is lifted: got %+v, want allowed with %d remaining (%d admitted at maxmemory, each counted once)", reqs[i].Params.Algorithm, r, want, admitted[reqs[i].Key])
		}
	}
}
