package topology_test

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/kafka/usagetopic"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/internal/testkit/kafkatest"
	"github.com/weirhq/weir/internal/testkit/pace"
	"github.com/weirhq/weir/internal/testkit/wait"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestEtcdMemberLoss runs two coordinators and two DCs on a three-member
// etcd and kills a follower member, then (the follower back) the leader
// member, then the leading coordinator. After each loss the shares follow
// a change of demand, every limiter instance acknowledges the newest
// assignment revision (none missed by its watch), one coordinator leads,
// and, over the whole history, every lease document was written by the
// coordinator that led the election at that revision: fenced writes stayed
// fenced.
func TestEtcdMemberLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd and kills its members")
	}
	dcs := []string{"a", "b"}
	etcd := etcdtest.StartCluster(t, 3)
	broker := kafkatest.Start(t, usagetopic.Name)
	path, rules := writeRules(t, "local")
	brokers := []string{broker.Addr()}
	coords := []*coord{
		startCoordinator(t, etcd.Client(t), brokers, "coord-0", dcs, rules),
		startCoordinator(t, etcd.Client(t), brokers, "coord-1", dcs, rules),
	}
	lims := map[string]*limiterProc{}
	for _, dc := range dcs {
		lims[dc] = startLimiter(t, dc, dc+"-1", dcs, "", path, etcd.Endpoints(), brokers)
	}
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tctx, stopTraffic := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopTraffic()
	demand := &rates{m: map[string]float64{"a": 300, "b": 20}}
	for _, dc := range dcs {
		pace.Go(tctx, &wg, demand.of(dc), func() { lims[dc].check(tctx) })
	}

	// follows waits until the DC with the demand holds more than half of L.
	follows := func(what, busy string) {
		t.Helper()
		took := wait.For(t, 20*time.Second, what+": "+busy+" holds most of L", func() bool {
			return lims[busy].localLimit(ctx) > limit/2
		})
		t.Logf("%s: shares followed demand to %s in %v", what, busy, took)
		took = ackedUpTo(ctx, t, cli, dcs, map[string]int{"a": 1, "b": 1}, 10*time.Second)
		t.Logf("%s: every instance acknowledged the newest assignments %v later", what, took)
		wait.For(t, 10*time.Second, what+": a coordinator leads", func() bool { return leader(coords) != nil })
	}
	follows("start", "a")

	follower := (etcd.Leader() + 1) % etcd.Members()
	etcd.KillMember(follower)
	demand.set(map[string]float64{"a": 20, "b": 300})
	follows("follower member killed", "b")
	etcd.RestartMember(follower)

	old := etcd.Leader()
	etcd.KillMember(old)
	demand.set(map[string]float64{"a": 300, "b": 20})
	follows("leader member killed", "a")
	etcd.RestartMember(old)

	lead := leader(coords)
	lead.crash()
	demand.set(map[string]float64{"a": 20, "b": 300})
	follows("leading coordinator crashed", "b")
	stopTraffic()
	wg.Wait()

	checkFenced(ctx, t, cli)
}

// checkFenced replays etcd's history (nothing is compacted in a test) and
// checks that every lease document was put by the coordinator that led the
// election at its revision, that leadership changed at least once, and
// that a write fenced by the first leader's election key is refused now.
func checkFenced(ctx context.Context, t *testing.T, cli *clientv3.Client) {
	t.Helper()
	now, err := cli.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	head := now.Header.Revision
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type candidate struct {
		name string
		rev  int64 // create revision
	}
	alive := map[string]candidate{} // election key → candidate
	var (
		first   *candidate
		leaders = map[string]bool{}
		leases  int
	)
	current := func() *candidate {
		var cs []candidate
		for _, c := range alive {
			cs = append(cs, c)
		}
		if len(cs) == 0 {
			return nil
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i].rev < cs[j].rev })
		return &cs[0]
	}
	var firstKey string
	for wr := range cli.Watch(wctx, layout.Quotas()[:len(layout.Quotas())-len("quotas/")], clientv3.WithPrefix(), clientv3.WithRev(1)) {
		if err := wr.Err(); err != nil {
			t.Fatalf("replay: %v", err)
		}
		for _, ev := range wr.Events {
			key := string(ev.Kv.Key)
			switch {
			case strings.HasPrefix(key, layout.Election()):
				if ev.Type == clientv3.EventTypeDelete {
					delete(alive, key)
					continue
				}
				var v struct {
					Name string `json:"name"`
				}
				if err := json.Unmarshal(ev.Kv.Value, &v); err != nil {
					t.Fatalf("election value at %d: %v", ev.Kv.ModRevision, err)
				}
				alive[key] = candidate{name: v.Name, rev: ev.Kv.CreateRevision}
			case strings.HasPrefix(key, layout.Quotas()) && strings.HasSuffix(key, "/_lease") && ev.Type == clientv3.EventTypePut:
				var l weirv1.AssignmentLease
				if err := proto.Unmarshal(ev.Kv.Value, &l); err != nil {
					t.Fatalf("lease at %d: %v", ev.Kv.ModRevision, err)
				}
				c := current()
				if c == nil || c.name != l.GetLeader() {
					t.Errorf("revision %d: lease of %s written by %s while %v led the election", ev.Kv.ModRevision, l.GetDc(), l.GetLeader(), c)
					continue
				}
				leases++
				leaders[c.name] = true
				if first == nil {
					first = c
					for k, a := range alive {
						if a == *c {
							firstKey = k
						}
					}
				}
			}
		}
		if wr.Header.Revision >= head && len(wr.Events) > 0 && wr.Events[len(wr.Events)-1].Kv.ModRevision >= head {
			break
		}
	}
	t.Logf("replayed %d revisions: %d lease writes by %d leaders, each by the election's leader", head, leases, len(leaders))
	if len(leaders) < 2 {
		t.Fatalf("lease writes by %d coordinators, want a change of leader in the history", len(leaders))
	}
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(firstKey), "=", first.rev)).
		Then(clientv3.OpPut(layout.Lease("a"), "deposed")).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Succeeded {
		t.Errorf("a write fenced by the first leader's election key (%s, revision %d) succeeded after it was deposed", firstKey, first.rev)
	}
}
