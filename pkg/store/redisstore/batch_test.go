package redisstore_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/storetest"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/store/redisstore"
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
// refunds (half of them of admissions made at their exact millisecond, so
// that the log's entries go), a month's end crossed, requests on a key
// of the wrong type (whose script fails between others), more requests
// than one batch holds — decide and refund exactly as the same requests
// sent one at a time, in the same order.
func TestBatchDecidesAsOneAtATime(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	batched, single := newStore(t, c, "batched"), newStore(t, c, "single")
	for _, s := range []*redisstore.Store{batched, single} {
		for _, p := range batchParams {
			if err := c.RPush(ctx, s.RedisKey(algorithm.Request{Key: "bad", Params: p}), "x").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 11))
	now := storetest.T0
	var decided []time.Time // when calls were decided, for refunds
	for call := range 300 {
		now = now.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
		if call == 150 {
			// 20 s before a month's end: refunds of admissions made
			// before it come after it.
			y, m, _ := now.Date()
			now = time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC).Add(-20 * time.Second)
		}
		n := 1 + rng.IntN(40)
		if call%50 == 0 {
			n = 70 // three batches in one pipeline
		}
		reqs := make([]algorithm.Request, n)
		for i := range reqs {
			key := fmt.Sprintf("k%d", rng.IntN(6))
			if rng.IntN(30) == 0 {
				key = "bad"
			}
			reqs[i] = algorithm.Request{Key: key, Params: batchParams[rng.IntN(len(batchParams))], Cost: int64(rng.IntN(4))}
			if i > 0 && rng.IntN(2) == 0 {
				// The rule and cost of the request before: sent as "=".
				reqs[i].Params, reqs[i].Cost = reqs[i-1].Params, reqs[i-1].Cost
			}
		}
		if rng.IntN(4) == 0 {
			at := now.Add(-time.Duration(rng.IntN(500)) * time.Millisecond)
			if len(decided) > 0 && rng.IntN(2) == 0 {
				at = decided[len(decided)-1-rng.IntN(min(len(decided), 20))]
			}
			berr := batched.Refund(ctx, at, now, reqs)
			var serr error
			for i := range reqs {
				if err := single.Refund(ctx, at, now, reqs[i:i+1]); err != nil && serr == nil {
					serr = err
				}
			}
			if (berr == nil) != (serr == nil) {
				t.Fatalf("call %d: batched refund: %v; alone: %v", call, berr, serr)
			}
			continue
		}
		got, err := batched.Decide(ctx, now, reqs)
		if err != nil {
			t.Fatalf("call %d: %v", call, err)
		}
		decided = append(decided, now)
		for i := range reqs {
			want, err := single.Decide(ctx, now, reqs[i:i+1])
			if err != nil {
				t.Fatalf("call %d: request %d alone: %v", call, i, err)
			}
			if (got[i].Err == nil) != (want[0].Err == nil) || (want[0].Err == nil && got[i] != want[0]) {
				t.Fatalf("call %d, request %d (%+v): batched %+v, alone %+v", call, i, reqs[i], got[i], want[0])
			}
		}
	}
}

// A batch of 16 admissions of a window counter costs Redis one EVALSHA
// for all 16, and each decision its GET and SET (in a window under a
// minute: a fresh key of a longer one also reads its key of the layout
// before, TestCommandsPerDecision).
func TestBatchCommands(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := newStore(t, c, "cmds")
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	p := algorithm.Params{Algorithm: algorithm.SlidingWindowCounter, Limit: 10, Window: 10 * time.Second}
	reqs := make([]algorithm.Request, 16)
	for i := range reqs {
		reqs[i] = algorithm.Request{Key: fmt.Sprintf("k%d", i), Params: p, Cost: 1}
	}
	got := decideCounting(t, s, c, reqs, true)
	if want := map[string]int64{"evalsha": 1, "get": 16, "set": 16}; !maps.Equal(got, want) {
		t.Errorf("got commands %v, want %v", got, want)
	}
}

// argsHook records the arguments of the script calls a client sends.
type argsHook struct{ calls [][]any }

func (h *argsHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *argsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.record(cmd)
		return next(ctx, cmd)
	}
}

func (h *argsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.record(cmd)
		}
		return next(ctx, cmds)
	}
}

func (h *argsHook) record(cmd redis.Cmder) {
	if n := cmd.Name(); n == "evalsha" || n == "eval" {
		h.calls = append(h.calls, cmd.Args())
	}
}

// storeWithArgsHook returns a store, its scripts loaded, on a client of
// its own redis-server that records the script calls it sends.
func storeWithArgsHook(t *testing.T, prefix string) (*redisstore.Store, *argsHook) {
	t.Helper()
	c := redistest.Start(t).Client(t)
	s := newStore(t, c, prefix)
	if err := s.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	hook := &argsHook{}
	c.AddHook(hook)
	return s, hook
}

// A batch sends a request's script and arguments once for a run of
// requests of the same rule and cost: the others of the run are "=".
func TestBatchSendsSharedArgumentsOnce(t *testing.T) {
	ctx := context.Background()
	s, hook := storeWithArgsHook(t, "args")
	p := algorithm.Params{Algorithm: algorithm.SlidingWindowCounter, Limit: 10, Window: 10 * time.Second}
	reqs := make([]algorithm.Request, 16)
	for i := range reqs {
		reqs[i] = algorithm.Request{Key: fmt.Sprintf("k%d", i), Params: p, Cost: 1}
	}
	reqs[8].Cost = 2 // breaks the run: sent in full, and so is the one after
	res, err := s.Decide(ctx, storetest.T0, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if want := r.Decision.Remaining; r.Err != nil || !r.Allowed || want != 10-reqs[i].Cost {
			t.Fatalf("request %d: %+v, want allowed with %d remaining", i, r, 10-reqs[i].Cost)
		}
	}
	if len(hook.calls) != 1 {
		t.Fatalf("%d script calls, want 1", len(hook.calls))
	}
	args := hook.calls[0]
	same := 0
	for _, a := range args {
		if a == "=" {
			same++
		}
	}
	// evalsha, sha, 16, the keys, mode, now, admittedAt; then three
	// requests in full (letter, 3, window, limit, cost), 13 as "=".
	if want := 3 + 16 + 3 + 3*5 + 13; len(args) != want || same != 13 {
		t.Errorf("%d arguments with %d \"=\", want %d with 13: %v", len(args), same, want, args)
	}
}

// A single node with cluster mode on refuses a batch script's keys
// (CROSSSLOT) though it owns every slot: the store sends those requests
// alone, decides them, and sends one script call per request from then
// on.
func TestBatchOnClusterModeNode(t *testing.T) {
	dir := t.TempDir()
	srv := redistest.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", dir+"/nodes.conf")
	c := srv.Client(t)
	ctx := context.Background()
	if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if info, _ := c.ClusterInfo(ctx).Result(); strings.Contains(info, "cluster_state:ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cluster state not ok in 10s")
		}
	}
	s := newStore(t, c, "xs")
	p := algorithm.Params{Algorithm: algorithm.SlidingWindowCounter, Limit: 1, Window: time.Minute}
	reqs := []algorithm.Request{{Key: "a", Params: p, Cost: 1}, {Key: "b", Params: p, Cost: 1}}
	for round, wantAllowed := range []bool{true, false} {
		// The first round: a refused batch, then each request alone, from
		// its source; the second: an EVALSHA each.
		got := decideCounting(t, s, c, reqs, wantAllowed)
		if round == 1 && got["evalsha"] != 2 {
			t.Errorf("after CROSSSLOT: got commands %v, want 2 EVALSHA (one per request)", got)
		}
	}
}

// A request whose script fails within a batch is sent again alone for its
// error — from its script's source, since after SCRIPT FLUSH a batch may
// have loaded the batch script again and nothing else: the caller gets
// the real error (WRONGTYPE), not NOSCRIPT, and the batch's other
// requests their decisions.
func TestBatchFailureAloneAfterScriptFlush(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := newStore(t, c, "flush")
	p := algorithm.Params{Algorithm: algorithm.SlidingWindowCounter, Limit: 5, Window: time.Minute}
	bad := algorithm.Request{Key: "bad", Params: p, Cost: 1}
	if err := c.RPush(ctx, s.RedisKey(bad), "x").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// A batch after the flush loads the batch script again, and only it.
	if _, err := s.Decide(ctx, storetest.T0, []algorithm.Request{{Key: "x", Params: p, Cost: 1}, {Key: "y", Params: p, Cost: 1}}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Decide(ctx, storetest.T0, []algorithm.Request{{Key: "good", Params: p, Cost: 1}, bad})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || !res[0].Allowed {
		t.Errorf("good key: got %+v, want allowed", res[0])
	}
	if res[1].Err == nil || !strings.Contains(res[1].Err.Error(), "WRONGTYPE") {
		t.Errorf("key holding a list: got %v, want a WRONGTYPE error", res[1].Err)
	}
}

// decideCounting decides reqs at storetest.T0, wants each decided without
// error and allowed or not as wantAllowed says, and returns the commands
// Redis ran for it (INFO commandstats).
func decideCounting(t *testing.T, s *redisstore.Store, c *redis.Client, reqs []algorithm.Request, wantAllowed bool) map[string]int64 {
	t.Helper()
	return commandsOf(t, c, func() {
		res, err := s.Decide(context.Background(), storetest.T0, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Allowed != wantAllowed {
				t.Fatalf("request %d: got %+v, want allowed=%v", i, r, wantAllowed)
			}
		}
	})
}

// The store reuses its calls from one Decide to the next; a client's hook
// that keeps a command keeps its arguments as they were sent.
func TestCommandsKeepTheirArguments(t *testing.T) {
	ctx := context.Background()
	s, hook := storeWithArgsHook(t, "keep")
	p := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 10, Window: time.Minute}
	for _, key := range []string{"first", "second", "third"} {
		if _, err := s.Decide(ctx, storetest.T0, []algorithm.Request{{Key: key, Params: p, Cost: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if len(hook.calls) != 3 {
		t.Fatalf("%d script calls, want 3", len(hook.calls))
	}
	for i, key := range []string{"first", "second", "third"} {
		if got := fmt.Sprint(hook.calls[i][3]); !strings.Contains(got, key) {
			t.Errorf("call %d's key, kept by a hook: %q, want the key of %q", i, got, key)
		}
	}
}
