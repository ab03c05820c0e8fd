package coordinator

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestHistory(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c1 := h.start("c1")
	waitFor(t, 5*time.Second, "c1 leads", c1.c.Leader)
	c2 := h.start("c2")

	fctx, stopFeed := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopFeed()
	h.feed(fctx, &wg, func() map[string]uint64 { return map[string]uint64{"a": 150, "b": 20, "c": 10} })

	// Points accumulate, one per interval, with the reported counts.
	waitFor(t, 15*time.Second, "three points with a's admitted requests", func() bool {
		r, ok, err := c1.c.Series("api", "r")
		if err != nil || !ok || len(r.DCs) != 3 {
			return false
		}
		n := 0
		for _, p := range r.DCs[0].Points {
			if p.Admitted > 0 {
				n++
			}
		}
		return n >= 3
	})
	r, _, _ := c1.c.Series("api", "r")
	if r.Limit != 1000 || r.DCs[0].DC != "a" {
		t.Errorf("got limit %d, first DC %q; want 1000, a", r.Limit, r.DCs[0].DC)
	}
	last := r.DCs[0].Points[len(r.DCs[0].Points)-1]
	if last.Share <= 0 || last.Demand <= 0 {
		t.Errorf("got a's last point %+v, want a positive share and demand", last)
	}
	for i := 1; i < len(r.DCs[0].Points); i++ {
		if !r.DCs[0].Points[i].At.After(r.DCs[0].Points[i-1].At) {
			t.Fatalf("got points out of order: %+v", r.DCs[0].Points)
		}
	}
	all, err := c1.c.AllSeries()
	if err != nil || len(all) != 1 || all[0].RuleID != "r" {
		t.Errorf("got AllSeries %d rules, %v; want rule r", len(all), err)
	}

	// The standby has none; it says so.
	if _, _, err := c2.c.Series("api", "r"); !errors.Is(err, ErrNotLeader) {
		t.Errorf("standby Series: got %v, want ErrNotLeader", err)
	}
	if _, _, err := c2.c.Instances(); !errors.Is(err, ErrNotLeader) {
		t.Errorf("standby Instances: got %v, want ErrNotLeader", err)
	}

	// Both coordinators are candidates, the leader first; any can say.
	cands, err := c2.c.Candidates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cands) != 2 || cands[0].Name != "c1" || !cands[0].Leader || cands[1].Name != "c2" || cands[1].Leader {
		t.Errorf("got candidates %+v, want c1 (leader) then c2", cands)
	}

	// The leader knows each DC's instance, its applied revision and its
	// last report.
	waitFor(t, 5*time.Second, "every DC's instance reported and applied", func() bool {
		_, dcs, err := c1.c.Instances()
		if err != nil || len(dcs) != 3 {
			return false
		}
		for _, d := range dcs {
			if len(d.Instances) != 1 || d.Instances[0].Instance != d.DC+"-1" || d.Instances[0].LastReport.IsZero() || d.Instances[0].Applied == 0 || d.Written == 0 {
				return false
			}
		}
		return true
	})
}
