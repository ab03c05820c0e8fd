package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/storetest"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/store/memstore"
)

var _ storetest.Store = (*memstore.Store)(nil)

func newStore(t testing.TB, cfg memstore.Config) *memstore.Store {
	t.Helper()
	s, err := memstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, "memory", func(t *testing.T) storetest.Store { return newStore(t, memstore.Config{}) })
}

func TestCapEvictsSoonestExpiring(t *testing.T) {
	s := newStore(t, memstore.Config{MaxKeys: 4, Shards: 1})
	ctx := context.Background()
	now := storetest.T0
	short := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 1, Window: time.Second}
	long := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 1, Window: time.Hour}
	decide := func(key string, p algorithm.Params) bool {
		res, err := s.Decide(ctx, now, []algorithm.Request{{Key: key, Params: p, Cost: 1}})
		if err != nil || res[0].Err != nil {
			t.Fatal(err, res[0].Err)
		}
		return res[0].Allowed
	}
	decide("short", short)
	for _, k := range []string{"a", "b", "c"} {
		decide(k, long)
	}
	if got := s.Len(); got != 4 {
		t.Fatalf("got %d keys, want 4", got)
	}
	if got := s.Evictions(); got != 0 {
		t.Fatalf("got %d evictions before the cap was reached, want 0", got)
	}
	decide("d", long) // full: the soonest-expiring key ("short") goes
	if got := s.Len(); got != 4 {
		t.Fatalf("got %d keys after eviction, want 4", got)
	}
	if got := s.Evictions(); got != 1 {
		t.Fatalf("got %d evictions, want 1", got)
	}
	if !decide("short", short) {
		t.Errorf("evicted key: got rejected, want a fresh key")
	}
	// Long keys kept their state except the one evicted for "short".
	kept := 0
	for _, k := range []string{"a", "b", "c", "d"} {
		if !decide(k, long) {
			kept++
		}
	}
	if kept < 3 {
		t.Errorf("got %d of 4 long-window keys still limited, want at least 3", kept)
	}
}

func TestExpiredKeysAreReclaimed(t *testing.T) {
	s := newStore(t, memstore.Config{MaxKeys: 100, Shards: 1})
	ctx := context.Background()
	p := algorithm.Params{Algorithm: algorithm.SlidingWindowCounter, Limit: 5, Window: time.Second}
	for i := range 100 {
		if _, err := s.Decide(ctx, storetest.T0, []algorithm.Request{{Key: string(rune('A' + i)), Params: p, Cost: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Sweep(storetest.T0.Add(time.Second)); got != 0 {
		t.Fatalf("Sweep one window later dropped %d, want 0 (the previous window still counts)", got)
	}
	if got := s.Sweep(storetest.T0.Add(2 * time.Second)); got != 100 {
		t.Fatalf("Sweep two windows later dropped %d, want 100", got)
	}
	// A full shard sweeps by itself: new keys after expiry never evict live ones.
	for i := range 100 {
		_, _ = s.Decide(ctx, storetest.T0, []algorithm.Request{{Key: "old" + string(rune('A'+i)), Params: p, Cost: 1}})
	}
	later := storetest.T0.Add(10 * time.Second)
	for i := range 50 {
		_, _ = s.Decide(ctx, later, []algorithm.Request{{Key: "new" + string(rune('A'+i)), Params: p, Cost: 1}})
	}
	if got := s.Len(); got > 100 {
		t.Fatalf("got %d keys, want at most the cap of 100", got)
	}
	if got := s.Evictions(); got != 0 {
		t.Fatalf("got %d evictions, want 0: only expired keys were dropped", got)
	}
}

func TestConfig(t *testing.T) {
	if _, err := memstore.New(memstore.Config{MaxKeys: -1}); err == nil {
		t.Error("negative MaxKeys: got nil error")
	}
	s := newStore(t, memstore.Config{MaxKeys: 3, Shards: 64})
	p := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 1, Window: time.Hour}
	for i := range 50 {
		_, _ = s.Decide(context.Background(), storetest.T0, []algorithm.Request{{Key: string(rune('a' + i)), Params: p, Cost: 1}})
	}
	if got := s.Len(); got > 3 {
		t.Errorf("MaxKeys 3 with 64 shards: got %d keys held, want at most 3", got)
	}
}

// TestFreshKeyStoredOnlyWhenItHoldsSomething checks what a request leaves
// behind on a key the store does not hold: a peek and a rejection that
// takes nothing leave it absent (docs/algorithms.md, "Nothing stored for
// nothing spent"), while an admission, and a rejection a FixedWindow
// counts (Params.CountRejected), keep what they took, as the Redis
// scripts write it.
func TestFreshKeyStoredOnlyWhenItHoldsSomething(t *testing.T) {
	type tc struct {
		name  string
		p     algorithm.Params
		cost  int64
		found bool
	}
	var tests []tc
	for _, a := range algorithm.All {
		p := algorithm.Params{Algorithm: a, Limit: 2, Window: time.Minute}
		zero := algorithm.Params{Algorithm: a, Limit: 0, Window: time.Minute}
		tests = append(tests,
			tc{a.String() + "/peek", p, 0, false},
			tc{a.String() + "/admitted", p, 1, true},
			tc{a.String() + "/rejected above the limit", p, 3, false},
			tc{a.String() + "/peek at a limit of 0", zero, 0, false},
			tc{a.String() + "/rejected at a limit of 0", zero, 1, false},
		)
	}
	counted := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 2, Window: time.Minute, CountRejected: true}
	countedZero := counted
	countedZero.Limit = 0
	tests = append(tests,
		tc{"FixedWindow counting rejections/peek", counted, 0, false},
		tc{"FixedWindow counting rejections/rejected above the limit", counted, 3, true},
		tc{"FixedWindow counting rejections/peek at a limit of 0", countedZero, 0, false},
		tc{"FixedWindow counting rejections/rejected at a limit of 0", countedZero, 1, true},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t, memstore.Config{})
			res, err := s.Decide(context.Background(), storetest.T0, []algorithm.Request{{Key: "k", Params: tt.p, Cost: tt.cost}})
			if err != nil || res[0].Err != nil {
				t.Fatal(err, res[0].Err)
			}
			want := 0
			if tt.found {
				want = 1
			}
			if got := s.Len(); got != want {
				t.Errorf("got %d keys held after a request of cost %d (allowed %v), want %d", got, tt.cost, res[0].Allowed, want)
			}
		})
	}
}
