package planner_test

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/internal/control/planner"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Planning rounds as the coordinator's leader loop runs them: each second
// the three DCs report what they were offered, the planner closes the
// interval (Tick), and Plan returns the documents to write. DC a wants
// most of the rule's 300 per second; once the estimates have seen the
// warm-up's three intervals, b and c shrink to their demand, and a grows
// into what they gave up only after they acknowledged it and the released
// quota has sat out the rule's window (the quarantine): the limits in force
// never sum above 300.
func Example() {
	p, err := planner.New(planner.Config{DCs: []string{"a", "b", "c"}, Interval: time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	p.SetRules([]rule.Rule{{Domain: "api", ID: "login", Limit: 300, WindowSeconds: 1, Scope: rule.ScopeGlobal, Enabled: true}})

	offered := map[string]uint64{"a": 400, "b": 30, "c": 20}
	// Before any plan, each DC enforces its static limit: L split evenly.
	limits := map[string]int64{"a": 100, "b": 100, "c": 100}
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	rev := int64(0)
	for second := 1; second <= 8; second++ {
		now := start.Add(time.Duration(second) * time.Second)
		for i, dc := range []string{"a", "b", "c"} {
			r := &weirv1.UsageReport{
				Dc: dc, Instance: dc + "-1", Sequence: uint64(second),
				IntervalStartMs: now.Add(-time.Second).UnixMilli(), IntervalMs: 1000,
				Rules: []*weirv1.RuleUsage{{Domain: "api", RuleId: "login", Offered: offered[dc], Admitted: offered[dc]}},
			}
			if err := p.Ingest(r, now.Add(time.Duration(i)*time.Millisecond)); err != nil {
				fmt.Println(err)
				return
			}
		}
		p.Tick(now.Add(400 * time.Millisecond))
		ws := p.Plan(now.Add(400 * time.Millisecond))
		if len(ws) > 0 {
			rev++
			p.Written(ws, rev, true)
			for _, w := range ws {
				limits[w.DC] = w.Doc.GetLimit()
			}
			// Every DC applies the documents at once and acknowledges.
			for _, dc := range []string{"a", "b", "c"} {
				p.SetAck(dc, rev, now.Add(450*time.Millisecond))
			}
		}
		p.Settle()
		if len(ws) > 0 {
			fmt.Printf("second %d: a=%d b=%d c=%d (sum %d)\n", second, limits["a"], limits["b"], limits["c"], limits["a"]+limits["b"]+limits["c"])
		}
	}
	// Output:
	// second 4: a=100 b=30 c=20 (sum 150)
	// second 6: a=250 b=30 c=20 (sum 300)
}
