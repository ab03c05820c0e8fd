package planner

import (
	"testing"

	"github.com/weirhq/weir/internal/control/demand"
)

// TestDemandOfUsageAwareEntry checks what a DC asks of an entry: the
// estimate, except that for a usage-aware entry the newest interval
// decides a start at once; and that a DC is idle only when both the
// estimate and the newest interval say it asks nothing.
func TestDemandOfUsageAwareEntry(t *testing.T) {
	est, err := demand.New(demand.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		observed []float64 // one per interval; -1: the interval is missing
		aware    bool
		wantAsk  float64 // -1: the estimate
		wantIdle bool
		est      string // "zero" or "set": what the estimate must be for the case to test what it says; "": any
	}{
		{name: "steady", observed: []float64{0.5, 0.5, 0.5, 0.5}, aware: true, wantAsk: -1},
		{name: "stopped, not yet confirmed", observed: []float64{0.5, 0.5, 0.5, 0}, aware: true, wantAsk: -1, est: "set"},
		{name: "stopped, not aware", observed: []float64{0.5, 0.5, 0.5, 0}, wantAsk: -1, est: "set"},
		{name: "stopped, confirmed", observed: []float64{0.5, 0.5, 0.5, 0, 0, 0}, aware: true, wantAsk: 0, wantIdle: true, est: "zero"},
		{name: "started", observed: []float64{0, 0, 0, 0.4}, aware: true, wantAsk: 0.4, est: "zero"},
		{name: "started, not aware", observed: []float64{0, 0, 0, 0.4}, wantAsk: 0, est: "zero"},
		{name: "quiet", observed: []float64{0, 0, 0}, aware: true, wantAsk: 0, wantIdle: true},
		{name: "quiet then missing", observed: []float64{0, 0, -1}, aware: true, wantAsk: 0, wantIdle: true},
		{name: "busy then missing", observed: []float64{0.5, 0.5, -1}, aware: true, wantAsk: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &entry{est: make([]demand.State, 1)}
			for i, x := range tc.observed {
				if x < 0 {
					est.Advance(&e.est[0], int64(i))
					continue
				}
				est.Observe(&e.est[0], int64(i), x)
			}
			want := tc.wantAsk
			if want < 0 {
				want = e.est[0].Estimate()
			}
			if got := e.demand(0, tc.aware); got != want {
				t.Errorf("demand = %v, want %v (estimate %v)", got, want, e.est[0].Estimate())
			}
			if zero := e.est[0].Estimate() == 0; tc.est == "zero" && !zero || tc.est == "set" && zero {
				t.Errorf("estimate %v, want it %s: the case does not test what it says", e.est[0].Estimate(), tc.est)
			}
			if got := e.idle(0); got != tc.wantIdle {
				t.Errorf("idle = %v, want %v", got, tc.wantIdle)
			}
		})
	}
}
