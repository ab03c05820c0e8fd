package topology_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/internal/testkit/pace"
	"github.com/weirhq/weir/internal/testkit/redistest"
)

// TestInstancesShareTheDC runs DC a as two limiter instances on one Redis
// (and DC b as one, for the static shares: a's is L/2), round-robins a's
// demand, well above its share, across the two, and counts what they
// admit per whole second:
//   - with Redis up, the two together stay within a's share;
//   - with Redis down (failure_mode local), each enforces half of a's share
//     in memory, so together they stay within it;
//   - when one of them stops mid-outage, the other sees one live instance
//     and grows to the whole share, and the DC still stays within it.
func TestInstancesShareTheDC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three limiters, Redis and etcd")
	}
	dcs := []string{"a", "b"}
	etcd := etcdtest.Start(t)
	redis := redistest.Start(t)
	path, _ := writeRules(t, "local")
	a := []*limiterProc{
		startLimiter(t, "a", "a-1", dcs, redis.Addr, path, etcd.Endpoints(), nil),
		startLimiter(t, "a", "a-2", dcs, redis.Addr, path, etcd.Endpoints(), nil),
	}
	startLimiter(t, "b", "b-1", dcs, "", path, etcd.Endpoints(), nil)
	// a's static share of L, less the planner's rounding margin.
	share := a[0].localLimit(context.Background())
	for _, l := range a {
		if got := l.localLimit(context.Background()); got != share || got > limit/2 || got < limit/2-2 {
			t.Fatalf("%s's local limit is %d, want a's static share ≈ %d", l.name, got, limit/2)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tctx, stopTraffic := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopTraffic()
	// An admission was decided somewhere between the request's sending and
	// its answer: it is counted in a second only when both fall in it, so
	// that a slow call on a loaded machine is never counted in a second it
	// may not have been decided in. The counts are then at most what was
	// decided in each second (so a count above the share is an excess),
	// short of it only by calls that straddle a boundary.
	type admission struct {
		instance   string
		sent, answ time.Time
	}
	var (
		mu       sync.Mutex
		admitted []admission
		next     atomic.Uint64
	)
	pace.Go(tctx, &wg, func() float64 { return 600 }, func() {
		l := a[next.Add(1)%2]
		if l.stopped.Load() {
			l = a[0]
		}
		sent := time.Now()
		if allowed, _ := l.check(tctx); allowed {
			answ := time.Now()
			mu.Lock()
			admitted = append(admitted, admission{l.name, sent, answ})
			mu.Unlock()
		}
	})
	// phase checks the whole seconds of [from, to): the DC within its
	// share, and returns the most one instance admitted in a second.
	phase := func(what string, from, to time.Time) int {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		perSecond := map[int64]map[string]int{} // second → instance → admitted in it surely
		for _, ad := range admitted {
			if s := ad.sent.Unix(); s == ad.answ.Unix() {
				if perSecond[s] == nil {
					perSecond[s] = map[string]int{}
				}
				perSecond[s][ad.instance]++
			}
		}
		worst, worstOne := 0, 0
		for s := from.Unix() + 1; s < to.Unix(); s++ {
			total := 0
			for _, n := range perSecond[s] {
				total += n
				worstOne = max(worstOne, n)
			}
			worst = max(worst, total)
			if int64(total) > share {
				t.Errorf("%s: second %d: DC a admitted %d, want ≤ its share %d", what, s-from.Unix(), total, share)
			}
		}
		t.Logf("%s: most admitted by DC a in one second %d (share %d), by one instance %d", what, worst, share, worstOne)
		return worstOne
	}

	start := time.Now()
	time.Sleep(3 * time.Second)
	phase("Redis up", start, time.Now())

	redis.Stop()
	down := time.Now()
	time.Sleep(3 * time.Second)
	if one := phase("Redis down, two instances", down.Add(time.Second), time.Now()); int64(one) > (share+1)/2 {
		t.Errorf("Redis down: one instance admitted %d in a second, want ≤ %d (half of a's share, rounded up)", one, (share+1)/2)
	}

	a[1].stop()
	stopped := time.Now()
	// a-2 revoked its etcd lease; a-1 counts one live instance within a
	// second (etcdquota's count interval) and takes the whole share.
	time.Sleep(3 * time.Second)
	if one := phase("Redis down, one instance", stopped, time.Now()); int64(one) <= share/2 {
		t.Errorf("Redis down, one instance left: it admitted at most %d in a second, want more than half the share (%d)", one, share/2)
	}
}
