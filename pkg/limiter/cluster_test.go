package limiter_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/breaker"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/store/coalesce"
	"github.com/weirhq/weir/pkg/store/redisstore"
)

const clusterYAML = `
domain: cluster
rules:
  - {rule_id: open, key_type: k, limit: 1000000000, window_seconds: 3600, algorithm: FixedWindow, failure_mode: open}
`

// keysPerNode is how many keys of each primary the cluster test decides.
const keysPerNode = 2

// TestClusterPrimaryKilledBreaksOnlyItsNode kills one of three Redis
// Cluster primaries while decisions run for keys on all three, through the
// coalescer as limiterd wires it: keys on the healthy primaries are
// decided by the store the whole time; keys on the dead one follow their
// rule's failure mode (open) until the replica is promoted and the
// breaker's cooldown has passed, then are decided by the store again, on
// the promoted replica, a node of its own whose breaker is closed. It logs
// the failover and recovery times quoted in docs/operations.md.
func TestClusterPrimaryKilledBreaksOnlyItsNode(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	rc := redis.NewClusterClient(&redis.ClusterOptions{
		// As limiterd tunes it: no retries, short timeouts, the context
		// bounds each call.
		Addrs: cl.Addrs(), MaxRetries: -1, ContextTimeoutEnabled: true,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		// One dial: a dead primary refuses at once, where go-redis's five
		// dials 100ms apart would hold the coalescer's merged calls, and
		// with them the healthy nodes' decisions, for half a second.
		DialerRetries: 1,
	})
	t.Cleanup(func() { _ = rc.Close() })
	rs, err := redisstore.New(rc, redisstore.Config{Prefix: "pernode"})
	if err != nil {
		t.Fatal(err)
	}
	co, err := coalesce.New(rs, coalesce.Config{Timeout: time.Second, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(co.Close)
	const cooldown = 500 * time.Millisecond
	const storeTimeout = 50 * time.Millisecond
	l, err := limiter.New(limiter.Config{
		Store: co, CacheKeys: -1,
		// The coalescer queues each node's calls apart (DecideOn): the
		// dead primary's connection refusals (80–140 ms here under -race)
		// hold up none of the healthy nodes' calls, so a bound well under
		// them keeps those on the store.
		StoreTimeout: storeTimeout,
		Breaker:      breaker.Config{Cooldown: cooldown},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := l.SetRules(compile(t, clusterYAML)); err != nil {
		t.Fatal(err)
	}
	check := func(key string) limiter.RuleResult {
		t.Helper()
		resp, err := l.Check(ctx, limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"k": key}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Items[0].Results[0]
	}

	// keysPerNode keys on each primary, by the store key the limiter uses.
	type key struct{ attr, node, redisKey string }
	var keys []key
	count := map[string]int{}
	for i := 0; len(keys) < 3*keysPerNode; i++ {
		if i > 1000 {
			t.Fatalf("no %d keys on each of three primaries among 1000: %v", keysPerNode, count)
		}
		attr := "key" + strconv.Itoa(i)
		r := check(attr)
		if r.Source != limiter.SourceStore {
			t.Fatalf("healthy cluster, key %s: got source %v, want store", attr, r.Source)
		}
		req := algorithm.Request{Key: r.Match.StoreKey}
		node, err := rs.Node(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if count[node] < keysPerNode {
			count[node]++
			keys = append(keys, key{attr, node, rs.RedisKey(req)})
		}
	}
	victim := keys[0].node
	victimSlot := redistest.Slot(keys[0].redisKey)

	// One caller per key, deciding it every few milliseconds until stop.
	var (
		stop       = make(chan struct{})
		wg         sync.WaitGroup
		killedAt   atomic.Int64 // Unix ns
		healthyBad atomic.Int64
		mu         sync.Mutex // guards the maps below
		firstFail  = map[string]time.Time{}
		backAt     = map[string]time.Time{}   // first store decision after a failure
		badSources = map[limiter.Source]int{} // of healthy keys
		oddSources = map[limiter.Source]int{} // of victim keys: neither store nor failure_open
		// healthyWait holds how long each decision of a healthy key took
		// after the kill.
		healthyWait []time.Duration
	)
	// caller checks items every 5 ms until stop, and hands each answer to
	// record with the time the check took.
	caller := func(items []limiter.Item, record func(resp limiter.Response, took time.Duration, now time.Time)) {
		wg.Go(func() {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				began := time.Now()
				resp, err := l.Check(ctx, limiter.Request{Items: items})
				if err != nil {
					t.Error(err)
					return
				}
				now := time.Now()
				record(resp, now.Sub(began), now)
			}
		})
	}
	for _, k := range keys {
		caller([]limiter.Item{{Attributes: map[string]string{"k": k.attr}}}, func(resp limiter.Response, took time.Duration, now time.Time) {
			src := resp.Items[0].Results[0].Source
			mu.Lock()
			defer mu.Unlock()
			if k.node != victim && killedAt.Load() != 0 {
				healthyWait = append(healthyWait, took)
			}
			switch {
			case k.node != victim && src != limiter.SourceStore:
				healthyBad.Add(1)
				badSources[src]++
			case k.node == victim && src != limiter.SourceStore:
				if src != limiter.SourceFailureOpen {
					oddSources[src]++
				}
				if _, ok := firstFail[k.attr]; !ok {
					firstFail[k.attr] = now
				}
			case k.node == victim && killedAt.Load() != 0:
				if _, failed := firstFail[k.attr]; failed {
					if _, ok := backAt[k.attr]; !ok {
						backAt[k.attr] = now
					}
				}
			}
		})
	}
	// One more caller checks every key in one request: a call per node
	// at once (the limiter's decideByNode), so its healthy keys are
	// decided by the store whatever the dead node does.
	items := make([]limiter.Item, len(keys))
	for i, k := range keys {
		items[i] = limiter.Item{Attributes: map[string]string{"k": k.attr}}
	}
	var mixedChecks, mixedVictimFallbacks atomic.Int64
	caller(items, func(resp limiter.Response, _ time.Duration, _ time.Time) {
		mixedChecks.Add(1)
		for i, k := range keys {
			src := resp.Items[i].Results[0].Source
			switch {
			case k.node != victim && src != limiter.SourceStore:
				healthyBad.Add(1)
				mu.Lock()
				badSources[src]++
				mu.Unlock()
			case k.node == victim && src != limiter.SourceStore:
				mixedVictimFallbacks.Add(1)
			}
		}
	})
	victimKeys := keysPerNode
	recovered := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(backAt) == victimKeys
	}

	killed := time.Now()
	killedAt.Store(killed.UnixNano())
	dead := cl.KillPrimaryOf(t, victimSlot)
	if dead != victim {
		t.Fatalf("killed %s, want the victim keys' primary %s", dead, victim)
	}
	promoted := cl.WaitPromoted(t, victimSlot, dead)
	promotedAfter := time.Since(killed)
	deadline := time.Now().Add(30 * time.Second)
	for !recovered() {
		if time.Now().After(deadline) {
			t.Fatalf("victim keys still not back on the store 30s after the promotion; node breakers %v", l.States())
		}
		time.Sleep(10 * time.Millisecond) // polls the callers' records
	}
	recoveredAfter := time.Since(killed)
	// The callers run a little longer: all keys stay on the store.
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()

	if n := healthyBad.Load(); n != 0 {
		t.Errorf("keys on the healthy primaries: got %d decisions not from the store (%v), want 0", n, badSources)
	}
	if mixedChecks.Load() == 0 || mixedVictimFallbacks.Load() == 0 {
		t.Errorf("checks of every key at once: %d, with %d victim items by the failure mode; want some of each", mixedChecks.Load(), mixedVictimFallbacks.Load())
	}
	if len(firstFail) != victimKeys {
		t.Errorf("victim keys that followed the failure mode: got %d, want %d: the kill was not seen", len(firstFail), victimKeys)
	}
	if len(oddSources) > 0 {
		t.Errorf("victim keys: got sources %v, want only store and failure_open", oddSources)
	}
	states := l.States()
	if s, ok := states[promoted]; !ok || s != breaker.Closed {
		t.Errorf("breaker of the promoted replica %s: got %v (known %v), want closed; all: %v", promoted, s, ok, states)
	}
	for _, k := range keys {
		if s := states[k.node]; k.node != victim && s != breaker.Closed {
			t.Errorf("breaker of healthy primary %s: got %v, want closed", k.node, s)
		}
	}
	if got, _ := rs.Node(ctx, algorithm.Request{Key: check(keys[0].attr).Match.StoreKey}); got != promoted {
		t.Errorf("node of a victim key after the failover: got %s, want the promoted replica %s", got, promoted)
	}
	var lastBack time.Duration
	for _, at := range backAt {
		lastBack = max(lastBack, at.Sub(killed))
	}
	slices.Sort(healthyWait)
	quantile := func(q float64) time.Duration {
		if len(healthyWait) == 0 {
			return 0
		}
		return healthyWait[min(len(healthyWait)-1, int(q*float64(len(healthyWait))))].Round(10 * time.Microsecond)
	}
	t.Logf("primary %s killed: replica %s promoted (seen by the test) %v after the kill; victim keys back on the store %v after the kill (last one %v); breaker cooldown %v, cluster-node-timeout %v; healthy keys: all %d callers' decisions from the store, %d decisions after the kill took p50 %v, p99 %v, max %v (store timeout %v)",
		dead, promoted, promotedAfter.Round(10*time.Millisecond), recoveredAfter.Round(10*time.Millisecond), lastBack.Round(10*time.Millisecond), cooldown, redistest.NodeTimeout, len(keys)-keysPerNode,
		len(healthyWait), quantile(0.5), quantile(0.99), quantile(1), storeTimeout)
}
