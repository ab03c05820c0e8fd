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
