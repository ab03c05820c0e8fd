package redisstore_test

import (
	"context"
	"errors"
	"net"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/storetest"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/store/redisstore"
)

// pipeCounter is a go-redis hook on every node client of a cluster client:
// it counts, per node, the pipelines (round trips) sent and the commands
// in them.
type pipeCounter struct {
	mu    sync.Mutex
	pipes map[string]int
	cmds  map[string]int
}

func (p *pipeCounter) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pipes, p.cmds = map[string]int{}, map[string]int{}
}

type nodeHook struct {
	p    *pipeCounter
	addr string
}

func (h nodeHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h nodeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h nodeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.p.mu.Lock()
		h.p.pipes[h.addr]++
		h.p.cmds[h.addr] += len(cmds)
		h.p.mu.Unlock()
		return next(ctx, cmds)
	}
}

// infoCount reads one counter of INFO section on the node at addr: field
// (e.g. "calls") of the line that starts with line (e.g. "cmdstat_evalsha").
func infoCount(t *testing.T, addr, section, line, field string) int {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(line) + `:.*\b` + field + `=(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestClusterBatchIsOnePipelinePerNode decides a batch whose keys live on
// all three primaries, and checks that each primary got one pipeline
// holding exactly its keys' scripts (counted by a client hook, and by the
// node's own INFO commandstats): no redirection, no extra round trip.
func TestClusterBatchIsOnePipelinePerNode(t *testing.T) {
	cl := cluster.Get(t)
	ctx := context.Background()
	var pc pipeCounter
	pc.reset()
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	rc.OnNewNode(func(n *redis.Client) { n.AddHook(nodeHook{p: &pc, addr: n.Options().Addr}) })
	t.Cleanup(func() { _ = rc.Close() })
	s := newStore(t, rc, "trips")
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	p := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 10, Window: time.Minute}
	var reqs []algorithm.Request
	perNode := map[string]int{}
	for i := range 30 {
		r := algorithm.Request{Key: "k" + strconv.Itoa(i), Params: p, Cost: 1}
		node, err := s.Node(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		perNode[node]++
		reqs = append(reqs, r)
	}
	primaries, err := cl.Primaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(perNode) != len(primaries) {
		t.Fatalf("keys on %d nodes (%v), want all %d primaries", len(perNode), perNode, len(primaries))
	}
	// A first batch opens each node's connection (whose set-up is a
	// pipeline of its own).
	if _, err := s.Decide(ctx, storetest.T0, reqs); err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	for _, n := range primaries {
		before[n] = infoCount(t, n, "commandstats", "cmdstat_evalsha", "calls")
	}
	pc.reset()
	res, err := s.Decide(ctx, storetest.T0, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || !r.Allowed {
			t.Fatalf("request %d: got %+v, want allowed", i, r)
		}
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, n := range primaries {
		if got := pc.pipes[n]; got != 1 {
			t.Errorf("node %s: got %d pipelines, want 1", n, got)
		}
		if got := pc.cmds[n]; got != perNode[n] {
			t.Errorf("node %s: got %d commands in its pipeline, want %d (its keys)", n, got, perNode[n])
		}
		if got := infoCount(t, n, "commandstats", "cmdstat_evalsha", "calls") - before[n]; got != perNode[n] {
			t.Errorf("node %s: commandstats counts %d EVALSHA, want %d", n, got, perNode[n])
		}
	}
}

// TestClusterNoScriptIsReloaded flushes the scripts of every node: a single
// decision and a batch over all primaries each recover (by EVAL on the
// node that lacked the script) and count right.
func TestClusterNoScriptIsReloaded(t *testing.T) {
	rc := cluster.Get(t).Client(t)
	ctx := context.Background()
	s := newStore(t, rc, "noscript")
	p := algorithm.Params{Algorithm: algorithm.SlidingWindowLog, Limit: 3, Window: time.Minute}
	var batch []algorithm.Request
	for i := range 12 {
		batch = append(batch, algorithm.Request{Key: "b" + strconv.Itoa(i), Params: p, Cost: 1})
	}
	flush := func() {
		t.Helper()
		if err := rc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error {
			return n.ScriptFlush(ctx).Err()
		}); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		flush()
		res, err := s.Decide(ctx, storetest.T0, batch[:1])
		if err != nil || res[0].Err != nil || res[0].Remaining != int64(2-round) {
			t.Fatalf("round %d single: got %+v %v, want remaining %d", round, res, err, 2-round)
		}
		flush()
		res, err = s.Decide(ctx, storetest.T0, batch[1:])
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Remaining != int64(2-round) {
				t.Fatalf("round %d batch item %d: got %+v, want remaining %d", round, i, r, 2-round)
			}
		}
	}
}

// TestClusterSlotMigration moves a slot holding 20 keys to another primary
// while four callers decide those keys and keys of other slots, and checks
// that every key admitted exactly its limit (all decisions fall in one
// window) and no decision failed: the client followed ASK while the slot
// was half moved (the target counted ASKING commands) and MOVED after.
func TestClusterSlotMigration(t *testing.T) {
	cl := cluster.Get(t)
	rc := cl.Client(t)
	ctx := context.Background()
	s := newStore(t, rc, "mig")
	const limit = 40
	p := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: limit, Window: time.Hour}
	req := func(k string) algorithm.Request { return algorithm.Request{Key: k, Params: p, Cost: 1} }

	// 20 keys of one slot, 10 of other slots.
	slot := redistest.Slot(s.RedisKey(req("m0")))
	var keys []string
	others := 0
	for i := 0; len(keys) < 30; i++ {
		k := "m" + strconv.Itoa(i)
		if redistest.Slot(s.RedisKey(req(k))) == slot {
			keys = append(keys, k)
		} else if others < 10 {
			keys = append(keys, k)
			others++
		}
	}
	from, err := cl.PrimaryOf(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	primaries, err := cl.Primaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	to := primaries[0]
	if to == from {
		to = primaries[1]
	}
	asking := infoCount(t, to, "commandstats", "cmdstat_asking", "calls")

	var (
		allowed  = make([]atomic.Int64, len(keys))
		tried    = make([]atomic.Int64, len(keys))
		attempts atomic.Int64
		failed   atomic.Int64
		firstErr atomic.Value
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	now := storetest.T0.Add(time.Second)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i += 3 {
				select {
				case <-stop:
					return
				default:
				}
				idx := []int{i % len(keys), (i + 1) % len(keys), (i + 2) % len(keys)}
				batch := []algorithm.Request{req(keys[idx[0]]), req(keys[idx[1]]), req(keys[idx[2]])}
				if w%2 == 1 {
					batch, idx = batch[:1], idx[:1] // single EVALSHA too
				}
				res, err := s.Decide(ctx, now, batch)
				attempts.Add(int64(len(batch)))
				for _, k := range idx {
					tried[k].Add(1)
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				for j, r := range res {
					if r.Err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, r.Err)
					} else if r.Allowed {
						allowed[idx[j]].Add(1)
					}
				}
			}
		}()
	}
	waitAttempts := func(more int64) {
		t.Helper()
		target := attempts.Load() + more
		deadline := time.Now().Add(30 * time.Second)
		for attempts.Load() < target {
			if time.Now().After(deadline) {
				t.Fatalf("callers stalled at %d attempts, want %d", attempts.Load(), target)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitAttempts(200)
	m, err := cl.BeginMigration(ctx, slot, to)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := m.MoveKeys(ctx, 10); err != nil || n != 10 {
		t.Fatalf("moved %d keys, %v; want 10", n, err)
	}
	waitAttempts(300) // half the slot's keys on each side: ASK
	if err := m.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	waitAttempts(300) // MOVED, then the new map
	for i := range keys {
		for tried[i].Load() < 2*limit {
			waitAttempts(10)
		}
	}
	close(stop)
	wg.Wait()

	if n := failed.Load(); n > 0 {
		t.Errorf("got %d failed decisions (first: %v), want 0", n, firstErr.Load())
	}
	for i, k := range keys {
		if got := allowed[i].Load(); got != limit {
			t.Errorf("key %s (slot %d): got %d admitted, want exactly %d", k, redistest.Slot(s.RedisKey(req(k))), got, limit)
		}
	}
	if got := infoCount(t, to, "commandstats", "cmdstat_asking", "calls") - asking; got == 0 {
		t.Error("target node got no ASKING: the migration was never seen half done")
	}
	if got, _ := s.Node(ctx, req(keys[0])); got != to {
		t.Errorf("node of a migrated key: got %s, want %s", got, to)
	}
}

// TestClusterPrimaryKilled kills the primary of one key's slot while a
// caller decides that key and keys on the two other primaries: the other
// keys never fail; the victim's decisions fail with a *NodeError naming
// the dead node until its replica is promoted, then come back to the
// store (on the new primary, with the script loaded there by EVAL). It
// logs the failover and recovery times quoted in docs/operations.md.
func TestClusterPrimaryKilled(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	rc := redis.NewClusterClient(&redis.ClusterOptions{
		// As limiterd tunes it: no retries, the context bounds each call.
		Addrs: cl.Addrs(), MaxRetries: -1, ContextTimeoutEnabled: true,
		DialTimeout: 100 * time.Millisecond, ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond,
	})
	t.Cleanup(func() { _ = rc.Close() })
	s := newStore(t, rc, "kill") // no Load: scripts reach nodes by EVAL, and replicas never have them
	p := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 1_000_000, Window: time.Hour}
	// One key per primary; the first is the victim.
	byNode := map[string]algorithm.Request{}
	var reqs []algorithm.Request
	for i := 0; len(reqs) < 3; i++ {
		r := algorithm.Request{Key: "v" + strconv.Itoa(i), Params: p, Cost: 1}
		n, err := s.Node(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := byNode[n]; !ok {
			byNode[n] = r
			reqs = append(reqs, r)
		}
	}
	decide := func() []algorithm.Result {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		res, err := s.Decide(cctx, storetest.T0, reqs)
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		return res
	}
	for i, r := range decide() {
		if r.Err != nil {
			t.Fatalf("before the kill, request %d: %v", i, r.Err)
		}
	}
	victimSlot := redistest.Slot(s.RedisKey(reqs[0]))

	killed := time.Now()
	dead := cl.KillPrimaryOf(t, victimSlot)
	// A failure of the victim key is blamed on its node: the dead primary,
	// or, once the slot map has moved, the replica promoted in its place
	// (on a loaded machine it may still time out just after taking over) —
	// never on a healthy primary of the other keys.
	blamed := map[string]bool{}
	victimFailures := 0
	var recovered time.Duration
	for recovered == 0 {
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("victim key still failing 30s after the kill (%d failures)", victimFailures)
		}
		res := decide()
		for i, r := range res[1:] {
			if r.Err != nil {
				t.Fatalf("key on a healthy primary (request %d) failed %v after the kill: %v", i+1, time.Since(killed), r.Err)
			}
		}
		if err := res[0].Err; err != nil {
			victimFailures++
			var ne *redisstore.NodeError
			if !errors.As(err, &ne) {
				t.Fatalf("victim's error: got %v, want a *NodeError", err)
			}
			blamed[ne.Node] = true
			continue
		}
		recovered = time.Since(killed)
	}
	if victimFailures == 0 {
		t.Fatal("the victim key never failed: the kill was not seen")
	}
	promoted := cl.WaitPromoted(t, victimSlot, dead)
	for n := range blamed {
		if n != dead && n != promoted {
			t.Errorf("a failure of the victim key was blamed on node %s, neither the dead primary %s nor the promoted replica %s", n, dead, promoted)
		}
	}
	if !blamed[dead] {
		t.Errorf("no failure of the victim key was blamed on the dead primary %s (blamed: %v)", dead, blamed)
	}
	if got, _ := s.Node(ctx, reqs[0]); got != promoted {
		t.Errorf("node of the victim key: got %s, want the promoted replica %s", got, promoted)
	}
	if got := infoCount(t, promoted, "errorstats", "errorstat_NOSCRIPT", "count"); got == 0 {
		t.Errorf("promoted replica answered no NOSCRIPT: the test did not exercise the script's reload")
	}
	t.Logf("primary %s killed: %d failed decisions of its key, decided by the store again (on %s) %v after the kill; cluster-node-timeout %v",
		dead, victimFailures, promoted, recovered.Round(10*time.Millisecond), redistest.NodeTimeout)
}

// busyScript keeps a Redis busy for ARGV[1] microseconds: commands sent
// meanwhile queue, and run after it.
const busyScript = `local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start >= tonumber(ARGV[1])
return 0`

// TestClusterDecisionNotResent: a decision whose reply does not come
// within the client's read timeout, because its node is busy, is not sent
// again — go-redis re-sends a timed-out command on Redis Cluster, even
// with MaxRetries -1, and the node would then count its hits once per
// send. One decision, a batch script of several, and a pipeline of
// scripts each fail once and count once.
func TestClusterDecisionNotResent(t *testing.T) {
	cl := cluster.Get(t)
	ctx := context.Background()
	rc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: cl.Addrs(), MaxRetries: -1, MinRetryBackoff: -1, ContextTimeoutEnabled: true,
		DialTimeout: time.Second, ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond,
	})
	t.Cleanup(func() { _ = rc.Close() })
	const limit = 100
	p := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: limit, Window: time.Hour}
	for _, tc := range []struct {
		name      string
		keys      int
		perScript bool // redisstore.Config.ScriptPerRequest: a pipeline of one script per key
	}{
		{"one decision", 1, false},
		{"a batch script", 3, false},
		{"a pipeline of scripts", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Keys of their own on the package's shared cluster, however
			// often the test runs.
			s, err := redisstore.New(rc, redisstore.Config{Prefix: "resend-" + strconv.FormatInt(time.Now().UnixNano(), 36), ScriptPerRequest: tc.perScript})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Load(ctx); err != nil {
				t.Fatal(err)
			}
			// Keys of one node, so that one round trip carries them all.
			var reqs []algorithm.Request
			var node string
			for i := 0; len(reqs) < tc.keys; i++ {
				r := algorithm.Request{Key: tc.name + strconv.Itoa(i), Params: p, Cost: 1}
				n, err := s.Node(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				if node == "" {
					node = n
				}
				if n == node {
					reqs = append(reqs, r)
				}
			}
			nc := redis.NewClient(&redis.Options{Addr: node})
			defer nc.Close()
			busy := make(chan error, 1)
			go func() { busy <- nc.Eval(ctx, busyScript, nil, 800_000).Err() }()
			time.Sleep(50 * time.Millisecond) // the busy script runs first

			// A caller's deadline far beyond the read timeout: go-redis
			// has time for its attempts.
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			res, err := s.Decide(cctx, storetest.T0, reqs)
			cancel()
			if err == nil {
				for i, r := range res {
					if r.Err == nil {
						t.Fatalf("request %d decided while its node was busy: %+v", i, r)
					}
				}
			}
			if err := <-busy; err != nil {
				t.Fatalf("busy script: %v", err)
			}

			// The failed call ran once, after the busy script; this
			// decision is the second hit of each key.
			res, err = s.Decide(ctx, storetest.T0, reqs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Err != nil || r.Remaining != limit-2 {
					t.Errorf("key %d: remaining %d (err %v), want %d: the failed call counted %d times, want once", i, r.Remaining, r.Err, limit-2, limit-1-r.Remaining)
				}
			}
		})
	}
}

// dialCounter is a go-redis hook that counts dials.
type dialCounter struct{ n atomic.Int64 }

func (d *dialCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.n.Add(1)
		return next(ctx, network, addr)
	}
}
func (d *dialCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (d *dialCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestClusterLookupAfterFailure: a cluster the client cannot log in to
// (a wrong password), or whose nodes accept connections and answer
// nothing (each lookup bounded by a context, as the limiter bounds store
// calls), is not dialled once per lookup of a key's node: the failure
// answers lookups for SlotMapRetry, then the map is tried again; with
// the right password, lookups succeed at once after the wait.
func TestClusterLookupAfterFailure(t *testing.T) {
	c := redistest.StartClusterPassword(t, "right")
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	tests := []struct {
		name     string
		addrs    []string
		password string
		wantErr  bool
	}{
		{"wrong password", c.Addrs(), "wrong", true},
		{"right password", c.Addrs(), "right", false},
		{"no node answers", silentNodes(t, 3), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: tt.addrs, Password: tt.password, MaxRetries: -1, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = rc.Close() })
			dials := &dialCounter{}
			rc.OnNewNode(func(n *redis.Client) { n.AddHook(dials) })
			s, err := redisstore.New(rc, redisstore.Config{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			lookups := func() (failed int) {
				for i := range 50 {
					r := algorithm.Request{Key: "user-" + strconv.Itoa(i), Params: algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 1, Window: time.Second}, Cost: 1}
					ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
					if _, err := s.Node(ctx, r); err != nil {
						failed++
					}
					cancel()
				}
				return failed
			}
			for round := range 2 {
				before := dials.n.Load()
				failed := lookups()
				if want := map[bool]int{true: 50, false: 0}[tt.wantErr]; failed != want {
					t.Errorf("round %d: %d of 50 lookups failed, want %d", round+1, failed, want)
				}
				// A load of the map dials each seed it tries at most
				// once, or reuses the connections it has.
				if got := dials.n.Load() - before; got > int64(len(tt.addrs)) {
					t.Errorf("round %d: 50 lookups dialled %d times, want at most %d (one load of the map)", round+1, got, len(tt.addrs))
				}
				if tt.wantErr && round == 0 && dials.n.Load() == before {
					t.Errorf("round 1: no dial: the map was never tried")
				}
				clock.Advance(redisstore.SlotMapRetry)
			}
		})
	}
}

// silentNodes returns the addresses of n listeners on loopback that
// accept connections and never answer, closed when t ends.
func silentNodes(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var conns []net.Conn
		var mu sync.Mutex
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, conn)
				mu.Unlock()
			}
		}()
		t.Cleanup(func() {
			_ = ln.Close()
			<-done
			mu.Lock()
			defer mu.Unlock()
			for _, c := range conns {
				_ = c.Close()
			}
		})
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}
