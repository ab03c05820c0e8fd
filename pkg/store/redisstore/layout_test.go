package redisstore_test

import (
	"context"
	"encoding/binary"
	"maps"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/storetest"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/store/redisstore"
)

// Tests of the keys' layouts (docs/algorithms.md, "Redis: one key and one
// script per decision"): the packed doubles of version 3, a window
// counter's window tag and the TTL it keeps, and what a key
// of an earlier layout does to a decision.

// packed returns a bucket's layout-3 state (and, followed by a tag, a
// window counter's): each number a little-endian double.
func packed(nums ...float64) string {
	b := make([]byte, 0, 8*len(nums))
	for _, f := range nums {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	}
	return string(b)
}

// packedWindow returns a window counter's packed state: its numbers, then
// the tag of its window w (its length in ms, at most 2^32 - 1, as
// uint32).
func packedWindow(w time.Duration, nums ...float64) string {
	return string(binary.LittleEndian.AppendUint32([]byte(packed(nums...)), uint32(min(w.Milliseconds(), math.MaxUint32))))
}

// layout2Key returns the version-2 name of r's key: its tag's version 2.
func layout2Key(s *redisstore.Store, r algorithm.Request) string {
	key := s.RedisKey(r)
	return key[:len(key)-1] + "2"
}

// layout2Value returns a version-2 state of a key of p at now holding
// count units of cost: a window counter's count in the window holding
// now, or a bucket's fill of count tokens last updated at now.
func layout2Value(p algorithm.Params, now time.Time, count int64) string {
	itoa := func(i int64) string { return strconv.FormatInt(i, 10) }
	ms, w := now.UnixMilli(), p.Window.Milliseconds()
	switch {
	case p.Calendar == algorithm.Month:
		start, _ := p.WindowBounds(now)
		return itoa(start.UnixMilli()) + ":" + itoa(count)
	case p.Algorithm == algorithm.FixedWindow:
		return itoa(ms-ms%w) + ":" + itoa(count)
	case p.Algorithm == algorithm.SlidingWindowCounter:
		return itoa(ms-ms%w) + ":" + itoa(count) + ":0"
	}
	return itoa(count*w) + ":" + itoa(ms)
}

// TestPackedLayout checks the bytes a decision leaves in Redis: the
// state's numbers as little-endian doubles, then a window counter's
// window tag, under the tags of version 3.
func TestPackedLayout(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := newStore(t, c, "weir")
	now := storetest.T0.Add(1500 * time.Millisecond)
	ms := float64(now.UnixMilli())
	start := float64(storetest.T0.Add(time.Second).UnixMilli())
	for _, tc := range []struct {
		a    algorithm.Algorithm
		tag  string
		want string
	}{
		{algorithm.TokenBucket, "tb3", packed(1000, ms)}, // one token is W (1000) units of fill
		{algorithm.LeakyBucket, "lb3", packed(1000, ms)},
		{algorithm.FixedWindow, "fw3", packedWindow(time.Second, start, 1)},
		{algorithm.SlidingWindowCounter, "sc3", packedWindow(time.Second, start, 1, 0)},
	} {
		r := algorithm.Request{Key: "user", Params: algorithm.Params{Algorithm: tc.a, Limit: 3, Burst: 3, Window: time.Second}, Cost: 1}
		if res, err := s.Decide(ctx, now, []algorithm.Request{r}); err != nil || res[0].Err != nil || !res[0].Allowed {
			t.Fatalf("%s: got %+v %v, want allowed", tc.a, res, err)
		}
		key := "weir:{user}:" + tc.tag
		if s.RedisKey(r) != key {
			t.Errorf("%s: key %q, want %q", tc.a, s.RedisKey(r), key)
		}
		if got, err := c.Get(ctx, key).Result(); err != nil || got != tc.want {
			t.Errorf("%s: value %x %v, want %x", tc.a, got, err, tc.want)
		}
	}
}

// TestWindowTTLKeptWithinAWindow checks when a window counter's write
// keeps its key's TTL (SET ... KEEPTTL) rather than setting it afresh:
// only in the window the key holds, under the same window length, so
// that the TTL kept is the one that window's first write set for it.
// After the first write the key's TTL is made 2,000 h, longer than any
// of these writes would set (a calendar month's, the longest, is at most
// 31 days and an hour), so that a TTL set afresh shows.
func TestWindowTTLKeptWithinAWindow(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := newStore(t, c, "weir")
	fixed := func(w time.Duration) algorithm.Params {
		return algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 100, Window: w}
	}
	sliding := func(w time.Duration) algorithm.Params {
		return algorithm.Params{Algorithm: algorithm.SlidingWindowCounter, Limit: 100, Window: w}
	}
	month := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 100, Window: algorithm.MonthWindow, Calendar: algorithm.Month}
	rejectsCounted := fixed(10 * time.Second)
	rejectsCounted.Limit, rejectsCounted.CountRejected = 1, true
	const day = 24 * time.Hour
	long := 50 * day // over 2^32 ms
	type step struct {
		p  algorithm.Params
		at time.Duration // after storetest.T0, a midnight (not a month's first)
	}
	for _, tc := range []struct {
		name        string
		first, then step
		refund      bool // then refunds the first decision
		kept        bool
	}{
		{"fixed, same window", step{fixed(10 * time.Second), time.Second}, step{fixed(10 * time.Second), 5 * time.Second}, false, true},
		{"fixed, refund in the same window", step{fixed(10 * time.Second), time.Second}, step{fixed(10 * time.Second), 5 * time.Second}, true, true},
		{"fixed, a rejection counted", step{rejectsCounted, time.Second}, step{rejectsCounted, 5 * time.Second}, false, true},
		{"fixed, next window", step{fixed(10 * time.Second), time.Second}, step{fixed(10 * time.Second), 11 * time.Second}, false, false},
		{"fixed, the window made longer", step{fixed(10 * time.Second), time.Second}, step{fixed(time.Minute), 5 * time.Second}, false, false},
		{"fixed, the window made shorter", step{fixed(time.Minute), time.Second}, step{fixed(10 * time.Second), 5 * time.Second}, false, false},
		{"fixed, a clock behind the stored window", step{fixed(10 * time.Second), 11 * time.Second}, step{fixed(10 * time.Second), 9 * time.Second}, false, true},
		{"fixed, a window of 50 days", step{fixed(long), time.Second}, step{fixed(long), 5 * time.Second}, false, false},
		{"sliding, same window", step{sliding(10 * time.Second), time.Second}, step{sliding(10 * time.Second), 5 * time.Second}, false, true},
		{"sliding, refund in the same window", step{sliding(10 * time.Second), time.Second}, step{sliding(10 * time.Second), 5 * time.Second}, true, true},
		{"sliding, next window", step{sliding(10 * time.Second), time.Second}, step{sliding(10 * time.Second), 11 * time.Second}, false, false},
		{"sliding, the window made longer", step{sliding(10 * time.Second), time.Second}, step{sliding(time.Minute), 5 * time.Second}, false, false},
		{"sliding, the window made shorter", step{sliding(time.Minute), time.Second}, step{sliding(10 * time.Second), 5 * time.Second}, false, false},
		{"sliding, a clock behind the stored window", step{sliding(10 * time.Second), 11 * time.Second}, step{sliding(10 * time.Second), 9 * time.Second}, false, true},
		{"sliding, a window of 50 days", step{sliding(long), time.Second}, step{sliding(long), 5 * time.Second}, false, false},
		{"calendar month, same month", step{month, time.Second}, step{month, day}, false, true},
		{"calendar month, next month", step{month, time.Second}, step{month, 9 * day}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := algorithm.Request{Key: strings.ReplaceAll(tc.name, " ", "-"), Params: tc.first.p, Cost: 1}
			t1 := storetest.T0.Add(tc.first.at)
			if res, err := s.Decide(ctx, t1, []algorithm.Request{r}); err != nil || res[0].Err != nil || !res[0].Allowed {
				t.Fatalf("first decision: got %+v %v", res, err)
			}
			key := s.RedisKey(r)
			if err := c.PExpire(ctx, key, 2000*time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			r.Params = tc.then.p
			now := storetest.T0.Add(tc.then.at)
			if tc.refund {
				if err := s.Refund(ctx, t1, now, []algorithm.Request{r}); err != nil {
					t.Fatal(err)
				}
			} else if _, err := s.Decide(ctx, now, []algorithm.Request{r}); err != nil {
				t.Fatalf("second decision: %v", err)
			}
			// Every second step writes: the TTL set afresh shows that.
			ttl, err := c.PTTL(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if kept := ttl > 1999*time.Hour; kept != tc.kept {
				t.Errorf("TTL %v after the second write: kept %v, want %v", ttl, kept, tc.kept)
			}
		})
	}
}

// TestLayout2CarriedForLongWindows checks how a key moves from the
// decimal strings of version 2 to version 3: a key with no state of
// version 3 starts from its version-2 state when that state lasts a
// minute or more — a fixed window of a minute or a calendar month, a
// sliding window of 30 s (its state weighs for two), a bucket that takes
// that long to drain when full — so that an upgrade gives no long-window
// key its limit afresh; a shorter-lived state starts fresh. Once the
// version-3 key is written, the old one no longer counts, even full. On
// Redis Cluster too: the two keys share their hash tag, so their slot.
func TestLayout2CarriedForLongWindows(t *testing.T) {
	t.Run("node", func(t *testing.T) { testLayout2Carried(t, redistest.Start(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { testLayout2Carried(t, cluster.Get(t).Client(t)) })
}

func testLayout2Carried(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	// Its own prefix: the cluster is shared, and a run must not meet the
	// keys of the one before (-count).
	s := newStore(t, c, "carry"+strconv.FormatInt(time.Now().UnixNano(), 36))
	now := storetest.T0.Add(90 * time.Second)
	month := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 3, Window: algorithm.MonthWindow, Calendar: algorithm.Month}
	bucket := func(a algorithm.Algorithm, w time.Duration, limit, burst int64) algorithm.Params {
		return algorithm.Params{Algorithm: a, Window: w, Limit: limit, Burst: burst}
	}
	window := func(a algorithm.Algorithm, w time.Duration) algorithm.Params {
		return algorithm.Params{Algorithm: a, Window: w, Limit: 3}
	}
	for n, tc := range []struct {
		p     algorithm.Params
		carry bool
	}{
		{bucket(algorithm.TokenBucket, time.Minute, 3, 3), true},
		{bucket(algorithm.TokenBucket, 59*time.Second, 2, 2), false},
		// A minute's refill period is not needed: 120 tokens at 1 a
		// second take two minutes to drain.
		{bucket(algorithm.TokenBucket, time.Second, 1, 120), true},
		{bucket(algorithm.LeakyBucket, time.Hour, 3, 3), true},
		{bucket(algorithm.LeakyBucket, time.Second, 3, 3), false},
		{window(algorithm.FixedWindow, time.Minute), true},
		{window(algorithm.FixedWindow, 59*time.Second), false},
		{month, true},
		{window(algorithm.SlidingWindowCounter, 24*time.Hour), true},
		{window(algorithm.SlidingWindowCounter, 30*time.Second), true},
		{window(algorithm.SlidingWindowCounter, 29*time.Second), false},
	} {
		p := tc.p
		r := algorithm.Request{Key: "user" + strconv.Itoa(n), Params: p, Cost: 1}
		old := layout2Key(s, r)
		if err := c.Set(ctx, old, layout2Value(p, now, 1), time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		name := p.Algorithm.String() + " " + p.Window.String()
		want := p.Capacity() - 1 // fresh: less this request
		if tc.carry {
			want-- // and less the unit the old key holds
		}
		res, err := s.Decide(ctx, now, []algorithm.Request{r})
		if err != nil || res[0].Err != nil || !res[0].Allowed || res[0].Remaining != want {
			t.Errorf("%s: got %+v %v, want allowed with %d remaining", name, res, err, want)
		}
		// The version-3 key has a TTL of its own, carried or not (a
		// KEEPTTL on a key with none would leave it without one).
		if ttl, err := c.PTTL(ctx, s.RedisKey(r)).Result(); err != nil || ttl <= 0 {
			t.Errorf("%s: version-3 key's TTL %v %v, want one", name, ttl, err)
		}
		// The version-3 key holds the state now: the old key no longer
		// counts, even full.
		if err := c.Set(ctx, old, layout2Value(p, now, p.Capacity()), time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		res, err = s.Decide(ctx, now, []algorithm.Request{r})
		if err != nil || res[0].Err != nil || !res[0].Allowed || res[0].Remaining != want-1 {
			t.Errorf("%s, second request: got %+v %v, want allowed with %d remaining", name, res, err, want-1)
		}
	}
}

// TestLayout2CarriedAtLimitZero checks a bucket's state carried from
// version 2 at a limit of 0, where nothing drains and a write keeps the
// key's TTL (KEEPTTL, set under the last positive limit): the version-3
// key a refund or a peek writes takes the old key's TTL, rather than
// none (it would never expire) or a new one.
func TestLayout2CarriedAtLimitZero(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := newStore(t, c, "weir")
	if err := s.Load(ctx); err != nil { // so that no step's count holds a script's loading
		t.Fatal(err)
	}
	now := storetest.T0
	zero := algorithm.Params{Algorithm: algorithm.TokenBucket, Limit: 0, Burst: 3, Window: time.Hour}
	for _, tc := range []struct {
		name     string
		step     func(r algorithm.Request) error
		wantUsed int64
	}{
		{"refund", func(r algorithm.Request) error {
			return s.Refund(ctx, now, now.Add(time.Second), []algorithm.Request{r})
		}, 1},
		{"peek", func(r algorithm.Request) error {
			r.Cost = 0
			_, err := s.Decide(ctx, now.Add(time.Second), []algorithm.Request{r})
			return err
		}, 2},
	} {
		r := algorithm.Request{Key: tc.name, Params: zero, Cost: 1}
		key, old := s.RedisKey(r), layout2Key(s, r)
		if err := c.Set(ctx, old, layout2Value(zero, now, 2), 40*time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		got := commandsOf(t, c, func() {
			if err := tc.step(r); err != nil {
				t.Fatal(err)
			}
		})
		// docs/algorithms.md's count: the two GETs of a carried state,
		// the old key's PTTL, and the SET that takes it.
		if want := map[string]int64{"evalsha": 1, "get": 2, "pttl": 1, "set": 1}; !maps.Equal(got, want) {
			t.Errorf("%s: got commands %v, want %v", tc.name, got, want)
		}
		if ttl, err := c.PTTL(ctx, key).Result(); err != nil || ttl <= 39*time.Minute || ttl > 40*time.Minute {
			t.Errorf("%s: PTTL of the version-3 key: %v %v, want the old key's, about 40m", tc.name, ttl, err)
		}
		res, err := s.Decide(ctx, now.Add(2*time.Second), []algorithm.Request{{Key: tc.name, Params: zero, Cost: 0}})
		if err != nil || res[0].Err != nil || res[0].Used != tc.wantUsed {
			t.Errorf("%s: a peek after: got %+v %v, want %d used", tc.name, res, err, tc.wantUsed)
		}
	}
}

// TestLayout2OfAnotherShapeReadsFresh checks that a version-2 key a long
// window would start from, holding something else than a version-2
// state (a string of another shape, or another type), neither fails the
// decision nor sways it.
func TestLayout2OfAnotherShapeReadsFresh(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := newStore(t, c, "weir")
	n := 0
	for _, a := range []algorithm.Algorithm{algorithm.TokenBucket, algorithm.FixedWindow, algorithm.SlidingWindowCounter} {
		for _, set := range []func(key string) error{
			func(key string) error { return c.Set(ctx, key, "1:x", 0).Err() },
			func(key string) error { return c.Set(ctx, key, packed(0, 0, 0), 0).Err() },
			func(key string) error { return c.HSet(ctx, key, "w", "0", "c", "3").Err() },
			func(key string) error { return c.RPush(ctx, key, "3").Err() },
		} {
			n++
			r := algorithm.Request{Key: "user" + strconv.Itoa(n), Params: algorithm.Params{Algorithm: a, Limit: 3, Burst: 3, Window: time.Hour}, Cost: 1}
			if err := set(layout2Key(s, r)); err != nil {
				t.Fatal(err)
			}
			res, err := s.Decide(ctx, storetest.T0, []algorithm.Request{r})
			if err != nil || res[0].Err != nil || !res[0].Allowed || res[0].Remaining != 2 {
				t.Errorf("%s, case %d: got %+v %v, want allowed with 2 remaining", a, n, res, err)
			}
		}
	}
}

// TestOldLayoutIsIgnored checks that keys in the layout before version 2
// (hashes under the tags "tb", "lb", "fw" and "sc"), which a running
// deployment leaves behind, neither break nor sway a decision: the packed
// states live under new tags, and the old keys expire.
func TestOldLayoutIsIgnored(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := newStore(t, c, "weir")
	now := storetest.T0
	start := now.UnixMilli() - now.UnixMilli()%time.Minute.Milliseconds()
	old := map[algorithm.Algorithm][]any{
		algorithm.TokenBucket:          {"tb", "l", 3 * 60_000, "t", now.UnixMilli()},
		algorithm.LeakyBucket:          {"lb", "l", 3 * 60_000, "t", now.UnixMilli()},
		algorithm.FixedWindow:          {"fw", "w", start, "c", 3},
		algorithm.SlidingWindowCounter: {"sc", "w", start, "c", 3, "p", 0},
	}
	for a, fields := range old {
		p := algorithm.Params{Algorithm: a, Limit: 3, Burst: 3, Window: time.Minute}
		r := algorithm.Request{Key: "user", Params: p, Cost: 1}
		if err := c.HSet(ctx, "weir:{user}:"+fields[0].(string), fields[1:]...).Err(); err != nil {
			t.Fatal(err)
		}
		res, err := s.Decide(ctx, now, []algorithm.Request{r})
		if err != nil || res[0].Err != nil || !res[0].Allowed || res[0].Remaining != 2 {
			t.Errorf("%s next to a full old-layout key: got %+v %v, want allowed with 2 remaining", a, res, err)
		}
	}
}
