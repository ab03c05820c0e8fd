package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/storetest"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/store/redisstore"
)

var _ storetest.Store = (*redisstore.Store)(nil)

func newStore(t testing.TB, c redisstore.Client, prefix string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(c, redisstore.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	var n atomic.Int64
	storetest.Run(t, "redis", func(t *testing.T) storetest.Store {
		return newStore(t, c, fmt.Sprintf("t%d", n.Add(1)))
	})
}

// TestClusterConformance runs the suite against a Redis Cluster of three
// primaries: each key's state lives on the primary of its hash slot.
func TestClusterConformance(t *testing.T) {
	c := cluster.Get(t).Client(t)
	var n atomic.Int64
	// The cluster is shared: a run must not meet the keys of the one
	// before (-count).
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	storetest.Run(t, "redis-cluster", func(t *testing.T) storetest.Store {
		return newStore(t, c, fmt.Sprintf("c%s-%d", run, n.Add(1)))
	})
}

func TestKeysHaveHashTagAndTTL(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := newStore(t, c, "weir")
	now := time.Now()
	for _, a := range algorithm.All {
		r := algorithm.Request{Key: "rule/{user}", Params: algorithm.Params{Algorithm: a, Limit: 10, Window: time.Minute}, Cost: 1}
		res, err := s.Decide(ctx, now, []algorithm.Request{r})
		if err != nil || res[0].Err != nil {
			t.Fatal(err, res[0].Err)
		}
		key := s.RedisKey(r)
		want := "weir:{rule/%7Buser%7D}:"
		if key[:len(want)] != want {
			t.Errorf("%s: got key %q, want prefix %q", a, key, want)
		}
		ttl, err := c.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 || ttl > 2*time.Minute+2*time.Second {
			t.Errorf("%s: got TTL %v, want within (0, 2m2s]", a, ttl)
		}
		slot, err := c.ClusterKeySlot(ctx, key).Result()
		if err == nil {
			other, _ := c.ClusterKeySlot(ctx, "{rule/%7Buser%7D}").Result()
			if slot != other {
				t.Errorf("%s: key slot %d differs from its hash tag's %d", a, slot, other)
			}
		}
	}
}

// A window counter's key lives until its window stops weighing plus a
// second, plus how long into the window the write came (modulo an hour):
// keys written across a window expire across as long a span, not all at
// the instant the window ends. For windows up to an hour that is a fixed
// TTL from the write that sets it, each window's first
// (TestWindowTTLKeptWithinAWindow: later writes in the window keep it).
func TestWindowTTL(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := newStore(t, c, "weir")
	const w = 10 * time.Second
	day := 24 * time.Hour
	for _, tc := range []struct {
		a       algorithm.Algorithm
		window  time.Duration
		at      []time.Duration // writes, after storetest.T0 (a day's start)
		wantTTL []time.Duration // after each
	}{
		{algorithm.FixedWindow, w, []time.Duration{0, 4 * time.Second, w, 2*w + 3*time.Second}, []time.Duration{w + time.Second, w + time.Second, w + time.Second, w + time.Second}},
		{algorithm.SlidingWindowCounter, w, []time.Duration{0, 4 * time.Second, w}, []time.Duration{2*w + time.Second, 2*w + time.Second, 2*w + time.Second}},
		// A day: until the day ends plus a second, plus 10 minutes (5h10m
		// into the day, modulo an hour).
		{algorithm.FixedWindow, day, []time.Duration{5*time.Hour + 10*time.Minute}, []time.Duration{18*time.Hour + 50*time.Minute + time.Second + 10*time.Minute}},
	} {
		r := algorithm.Request{Key: "ttl-" + tc.a.String() + tc.window.String(), Params: algorithm.Params{Algorithm: tc.a, Limit: 100, Window: tc.window}, Cost: 1}
		key := s.RedisKey(r)
		for i, at := range tc.at {
			if res, err := s.Decide(ctx, storetest.T0.Add(at), []algorithm.Request{r}); err != nil || res[0].Err != nil || !res[0].Allowed {
				t.Fatalf("%s at %v: got %+v %v, want admitted", tc.a, at, res, err)
			}
			ttl, err := c.PTTL(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			// Redis's own clock runs on between the calls: allow it a second.
			if want := tc.wantTTL[i]; ttl > want || ttl <= want-time.Second {
				t.Errorf("%s, window %v, write %v into it: TTL %v, want about %v", tc.a, tc.window, at, ttl, want)
			}
		}
	}
}

func TestNoScriptIsReloaded(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := newStore(t, c, "weir")
	p := algorithm.Params{Algorithm: algorithm.SlidingWindowCounter, Limit: 3, Window: time.Minute}
	for round := range 3 {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		// One request (plain EVALSHA) and a batch (pipeline) both recover.
		res, err := s.Decide(ctx, storetest.T0, []algorithm.Request{{Key: "one", Params: p, Cost: 1}})
		if err != nil || res[0].Err != nil || !res[0].Allowed {
			t.Fatalf("round %d single: got %+v %v, want allowed", round, res, err)
		}
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		res, err = s.Decide(ctx, storetest.T0, []algorithm.Request{{Key: "a", Params: p, Cost: 1}, {Key: "b", Params: p, Cost: 1}})
		if err != nil || res[0].Err != nil || res[1].Err != nil {
			t.Fatalf("round %d batch: got %+v %v", round, res, err)
		}
		if got := res[1].Remaining; got != int64(2-round) {
			t.Errorf("round %d batch: got remaining %d, want %d", round, got, 2-round)
		}
	}
}

func TestWrongTypeIsAnErrorNotACrash(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := newStore(t, c, "weir")
	r := algorithm.Request{Key: "k", Params: algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 3, Window: time.Minute}, Cost: 1}
	if err := c.HSet(ctx, s.RedisKey(r), "w", "0", "c", "1").Err(); err != nil {
		t.Fatal(err)
	}
	ok := r
	ok.Key = "fine"
	res, err := s.Decide(ctx, storetest.T0, []algorithm.Request{r, ok})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil {
		t.Errorf("key of the wrong type: got %+v, want an error", res[0])
	}
	if res[1].Err != nil || !res[1].Allowed {
		t.Errorf("other key in the batch: got %+v, want allowed", res[1])
	}
	// A value of the wrong shape inside the right type reads as fresh,
	// never panics: of another length than the state's packed doubles
	// (a version-2 decimal state among them), or of the right length with
	// a number that is not an integer, which would otherwise reject.
	t0 := float64(storetest.T0.UnixMilli())
	for _, a := range []algorithm.Algorithm{algorithm.TokenBucket, algorithm.FixedWindow, algorithm.SlidingWindowCounter} {
		r := r
		r.Params.Algorithm = a
		values := []string{"garbage", "1:x", "1:2:3:4", ":", "12", strconv.FormatInt(int64(t0), 10) + ":1", packed(t0, 0, 0, 0)}
		for _, n := range []float64{math.NaN(), math.Inf(1), 2.5} {
			switch a {
			case algorithm.TokenBucket:
				values = append(values, packed(n*60_000+0.5, t0)) // the fill, in 1/W units
			case algorithm.FixedWindow:
				values = append(values, packedWindow(time.Minute, t0, n))
			default:
				values = append(values, packedWindow(time.Minute, t0, n, 0))
			}
		}
		for _, v := range values {
			if err := c.Set(ctx, s.RedisKey(r), v, 0).Err(); err != nil {
				t.Fatal(err)
			}
			res, err := s.Decide(ctx, storetest.T0, []algorithm.Request{r})
			if err != nil || res[0].Err != nil || res[0].Remaining != 2 {
				t.Errorf("%s over %x: got %+v %v, want allowed with 2 remaining", a, v, res, err)
			}
		}
	}
}

// Load finds the struct library and Redis 6.0's Lua in a real Redis (of
// the version the tests run, 7.0 on Debian), and a Redis it cannot reach
// is reported as that, not as a server lacking either.
func TestLoadChecksTheServer(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	defer c.Close()
	s := newStore(t, c, "weir")
	if err := s.Load(context.Background()); err != nil {
		t.Fatalf("Load on redis-server: %v", err)
	}
	srv.Stop()
	if err := s.Load(context.Background()); err == nil || errors.Is(err, redisstore.ErrNoStruct) || errors.Is(err, redisstore.ErrRedisTooOld) || strings.Contains(err.Error(), "lacks") {
		t.Fatalf("Load on a stopped redis-server: got %v, want a connection error", err)
	}
}

// The check Load runs tells a missing library from a present one on a
// real Redis, which fails a script that reads a global it lacks: asked for
// a library no Redis has, in place of struct, it answers 0 (ErrNoStruct),
// not an error; asked for a redis.* function no Redis has, in place of
// 6.0's setresp, 2 (ErrRedisTooOld).
func TestServerCheckOnAMissingPiece(t *testing.T) {
	c := redistest.Start(t).Client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, old, new string
		want           int64
	}{
		{"as it is", "", "", 1},
		{"no such library", "'struct'", "'nosuchlib'", 0},
		{"no such redis function", "redis.setresp", "redis.nosuchfn", 2},
	} {
		script := redisstore.ServerCheck
		if tc.old != "" {
			if !strings.Contains(script, tc.old) {
				t.Fatalf("%s: the check no longer names %s", tc.name, tc.old)
			}
			script = strings.Replace(script, tc.old, tc.new, 1)
		}
		got, err := c.Eval(ctx, script, nil).Int64()
		if err != nil || got != tc.want {
			t.Errorf("%s: got %d %v, want %d", tc.name, got, err, tc.want)
		}
	}
}

func TestDeadRedisFailsFast(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	defer c.Close()
	s := newStore(t, c, "weir")
	srv.Stop()
	r := algorithm.Request{Key: "k", Params: algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 3, Window: time.Minute}, Cost: 1}
	res, err := s.Decide(context.Background(), storetest.T0, []algorithm.Request{r, r})
	if err == nil && res[0].Err == nil {
		t.Fatalf("dead Redis: got %+v, want an error", res)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Decide(ctx, storetest.T0, []algorithm.Request{r}); err == nil {
		t.Fatal("cancelled context: got nil error")
	}
}

func TestConfigRejectsBracesInPrefix(t *testing.T) {
	if _, err := redisstore.New(nil, redisstore.Config{Prefix: "a{b"}); err == nil {
		t.Fatal("got nil error, want one")
	}
}
