package coordinator

import (
	"context"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestCoordinatorWritesWitnessLeases checks that a round between ticks
// that prunes a DC's write of a read entry, and writes none of that DC's
// documents, writes its lease alone (planner.WitnessLeases): a reading
// at that lease's revision was surely taken after the pruning. The ticks
// renew every DC's lease in one transaction, so a lease of a written at a
// revision where b's was not is a witness. The demand of a long-window
// rule comes from a, then moves to b: each write of a's that a
// acknowledges prunes the one before (a's writes change as it grows from
// its static share, and again as it shrinks once the demand has left;
// the first suffices, about 1.4 s in here).
func TestCoordinatorWritesWitnessLeases(t *testing.T) {
	h := newHarness(t)
	long := rule.Rule{Domain: "api", ID: "r", Limit: 1000, WindowSeconds: 600, Algorithm: algorithm.SlidingWindowLog,
		Scope: rule.ScopeGlobal, Enabled: true}
	c := h.startRules("c1", long)
	waitFor(t, 5*time.Second, "c1 leads", c.c.Leader)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)

	var mu sync.Mutex
	leases := map[int64]map[string]bool{} // revision → DCs whose lease was put at it
	watch := h.cli.Watch(ctx, h.layout.Quotas(), clientv3.WithPrefix())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() {
		for resp := range watch {
			for _, ev := range resp.Events {
				for _, dc := range simDCs {
					if string(ev.Kv.Key) == h.layout.Lease(dc) && ev.Type == clientv3.EventTypePut {
						mu.Lock()
						if leases[ev.Kv.ModRevision] == nil {
							leases[ev.Kv.ModRevision] = map[string]bool{}
						}
						leases[ev.Kv.ModRevision][dc] = true
						mu.Unlock()
					}
				}
			}
		}
	})
	witnessed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, dcs := range leases {
			if dcs["a"] && !dcs["b"] {
				return true
			}
		}
		return false
	}

	// Every 200 ms: each DC's report, with what it consumed read at the
	// revision it applied (all of etcd's so far: ackAll), then the acks.
	start := time.Now()
	for !witnessed() && time.Since(start) < 15*time.Second {
		moved := time.Since(start) > 3*time.Second
		rev := h.ackAll(ctx)
		interval := time.Now().UnixMilli()/200*200 - 200
		for _, dc := range simDCs {
			offered, consumed := uint64(0), int64(0)
			switch {
			case dc == "a":
				consumed = 400 // a's admissions stay in the window
				if !moved {
					offered = 900
				}
			case dc == "b" && moved:
				offered = 900
			}
			h.seq++
			h.send(ctx, &weirv1.UsageReport{Dc: dc, Instance: dc + "-1", Sequence: h.seq, IntervalStartMs: interval, IntervalMs: 200,
				AppliedRevision: rev, Rules: []*weirv1.RuleUsage{{Domain: "api", RuleId: "r", Offered: offered, Admitted: offered, Consumed: &consumed}}})
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !witnessed() {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("no lease of a written without b's in 15 s: leases by revision %v", leases)
	}
	t.Logf("a's lease written alone %v after the start (the demand moves at 3 s)", time.Since(start).Round(time.Millisecond))
}
