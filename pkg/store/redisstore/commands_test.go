package redisstore_test

import (
	"cmp"
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/storetest"
	"github.com/weirhq/weir/pkg/algorithm"
)

// commandStat returns one field of the reply of INFO commandstats
// ("cmdstat_get:calls=3,usec=..." lines) by lowercase command name:
// "calls", or "usec", the microseconds Redis spent in the command (a
// script's own commands included in its EVALSHA's).
func commandStat(info, field string) map[string]int64 {
	stat := make(map[string]int64)
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || len(name) == len(line) {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, field+"="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err == nil {
					stat[name] = n
				}
			}
		}
	}
	return stat
}

// commandsOf returns the calls per command Redis ran during step, as INFO
// commandstats counts them (the statistics reset before it).
func commandsOf(t *testing.T, c redis.UniversalClient, step func()) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	step()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := commandStat(info, "calls")
	delete(calls, "config|resetstat")
	return calls
}

// TestCommandsPerDecision pins the commands Redis runs for one decision of
// each algorithm, as INFO commandstats counts them: the EVALSHA and the
// commands its script runs. docs/algorithms.md lists the same counts.
func TestCommandsPerDecision(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := newStore(t, c, "cmds")
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	t0 := storetest.T0
	ms := time.Millisecond
	type step struct {
		at     time.Duration // after t0
		cost   int64
		refund bool // give back cost admitted at t0
		noRate bool // at a limit of 0 (its share given up), not 2
	}
	const (
		admitFresh = "admit fresh key"
		// Of a state that lasts less than a minute (a window of 29 s,
		// a bucket that drains in 29 s): the counter algorithms read no
		// key of the layout before (lua/packed.lua's carryMs).
		admitFreshShort = "admit fresh key of a short window"
		admit           = "admit"
		admitSame       = "admit in the same ms"
		reject          = "reject"
		peek            = "peek"
		peekNoRate      = "peek at a limit of 0"
		refund          = "refund"
	)
	// Each case runs its setup steps at limit 2 in a window of a minute
	// (or window), then resets the stats and runs the measured step.
	steps := map[string]struct {
		setup  []step
		step   step
		window time.Duration
	}{
		admitFresh:      {nil, step{at: 0, cost: 1}, 0},
		admitFreshShort: {nil, step{at: 0, cost: 1}, 29 * time.Second},
		admit:           {[]step{{at: 0, cost: 1}}, step{at: ms, cost: 1}, 0},
		admitSame:       {[]step{{at: 0, cost: 1}}, step{at: 0, cost: 1}, 0},
		reject:          {[]step{{at: 0, cost: 2}}, step{at: ms, cost: 1}, 0},
		peek:            {[]step{{at: 0, cost: 1}}, step{at: ms, cost: 0}, 0},
		peekNoRate:      {[]step{{at: 0, cost: 1}}, step{at: ms, cost: 0, noRate: true}, 0},
		refund:          {[]step{{at: 0, cost: 1}}, step{at: ms, cost: 1, refund: true}, 0},
	}
	counter := map[string]map[string]int64{
		// A key with no state that would last a minute or more looks
		// for its state in the layout before: a second GET.
		admitFresh:      {"evalsha": 1, "get": 2, "set": 1},
		admitFreshShort: {"evalsha": 1, "get": 1, "set": 1},
		admit:           {"evalsha": 1, "get": 1, "set": 1},
		admitSame:       {"evalsha": 1, "get": 1, "set": 1},
		reject:          {"evalsha": 1, "get": 1},
		peek:            {"evalsha": 1, "get": 1},
		peekNoRate:      {"evalsha": 1, "get": 1},
		refund:          {"evalsha": 1, "get": 1, "set": 1},
	}
	bucket := maps.Clone(counter)
	// The refund empties the bucket: an empty bucket is deleted.
	bucket[refund] = map[string]int64{"evalsha": 1, "get": 1, "del": 1}
	// A peek settles the drain since the last write (usage readings rely
	// on it: bucket.lua).
	bucket[peek] = map[string]int64{"evalsha": 1, "get": 1, "set": 1}
	// At a limit of 0 nothing drains, but the clock moved: the fill is
	// written with the TTL it has (SET ... KEEPTTL, one SET).
	bucket[peekNoRate] = map[string]int64{"evalsha": 1, "get": 1, "set": 1}
	want := map[algorithm.Algorithm]map[string]map[string]int64{
		algorithm.TokenBucket:          bucket,
		algorithm.LeakyBucket:          bucket,
		algorithm.FixedWindow:          counter,
		algorithm.SlidingWindowCounter: counter,
		algorithm.SlidingWindowLog: {
			admitFresh:      {"evalsha": 1, "zremrangebyscore": 1, "zcard": 1, "zadd": 1, "pexpire": 1},
			admitFreshShort: {"evalsha": 1, "zremrangebyscore": 1, "zcard": 1, "zadd": 1, "pexpire": 1},
			admit:           {"evalsha": 1, "zremrangebyscore": 1, "zcard": 1, "zrange": 1, "zadd": 1, "pexpire": 1},
			admitSame:       {"evalsha": 1, "zremrangebyscore": 1, "zcard": 1, "zrange": 1, "zcount": 1, "zadd": 1, "pexpire": 1},
			reject:          {"evalsha": 1, "zremrangebyscore": 1, "zcard": 1, "zrange": 2},
			peek:            {"evalsha": 1, "zremrangebyscore": 1, "zcard": 1, "zrange": 1},
			// At a limit of 0 the peek is a rejection (the log holds 1).
			peekNoRate: {"evalsha": 1, "zremrangebyscore": 1, "zcard": 1, "zrange": 2},
			refund:     {"evalsha": 1, "zremrangebyscore": 1, "zcard": 1, "zcount": 1, "zrem": 1}, // the log is empty after
		},
	}
	n := 0
	for _, a := range algorithm.All {
		for name, st := range steps {
			t.Run(a.String()+"/"+name, func(t *testing.T) {
				n++
				p := algorithm.Params{Algorithm: a, Limit: 2, Window: cmp.Or(st.window, time.Minute)}
				if a == algorithm.LeakyBucket {
					p.Burst = 2
				}
				r := algorithm.Request{Key: "k" + strconv.Itoa(n), Params: p}
				run := func(st step) {
					t.Helper()
					r.Cost = st.cost
					r.Params.Limit = 2
					if st.noRate {
						r.Params.Limit = 0
					}
					if st.refund {
						if err := s.Refund(ctx, t0, t0.Add(st.at), []algorithm.Request{r}); err != nil {
							t.Fatal(err)
						}
						return
					}
					res, err := s.Decide(ctx, t0.Add(st.at), []algorithm.Request{r})
					if err != nil || res[0].Err != nil {
						t.Fatal(err, res[0].Err)
					}
				}
				for _, st := range st.setup {
					run(st)
				}
				got := commandsOf(t, c, func() { run(st.step) })
				if w := want[a][name]; !maps.Equal(got, w) {
					t.Errorf("got commands %v, want %v", got, w)
				}
			})
		}
	}
}
