package planner

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/allocate"
	"github.com/weirhq/weir/pkg/rule"
)

// A lone DC, or one DC that holds the whole share, is sent exactly the
// limit: no unit is lost to a float share of 0.9999999999999999.
func TestPlannerWholeLimit(t *testing.T) {
	for _, tc := range []struct {
		dcs   []string
		limit int64
	}{{[]string{"a"}, 3}, {[]string{"a"}, 1_000_000_000}, {[]string{"a", "b", "c"}, 5}, {[]string{"a", "b", "c"}, 7}} {
		t.Run(fmt.Sprintf("%d DCs, L=%d", len(tc.dcs), tc.limit), func(t *testing.T) {
			p, err := New(Config{DCs: tc.dcs, Interval: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			r := rule.Rule{Domain: "api", ID: "r", Limit: tc.limit, WindowSeconds: 300, Scope: rule.ScopeGlobal, Enabled: true}
			p.SetRules([]rule.Rule{r})
			now := time.UnixMilli(1_700_000_000_000)
			p.Load(now, nil, nil, nil)
			e := p.rules[ruleRef{"api", "r"}].entry
			sum := int64(0)
			for d := range tc.dcs {
				sum += e.static[d]
			}
			if sum != tc.limit {
				t.Errorf("static limits %v sum to %d, want %d", e.static, sum, tc.limit)
			}
			// All the demand in the last DC.
			share := make([]float64, len(tc.dcs))
			share[len(share)-1] = 0.9999999999999999
			allocate.Apportion(share, tc.limit, e.target)
			got := map[string]int64{}
			for range 3 {
				now = now.Add(time.Hour)
				ws := p.Plan(now)
				for _, w := range ws {
					got[w.DC] = w.Doc.GetLimit()
					if w.Doc.GetGlobalLimit() != tc.limit {
						t.Errorf("document's global limit %d, want %d", w.Doc.GetGlobalLimit(), tc.limit)
					}
				}
				p.Written(ws, int64(len(got))+10, true)
				p.Settle()
				for _, d := range tc.dcs {
					p.SetAck(d, 100, now)
				}
			}
			last := tc.dcs[len(tc.dcs)-1]
			if _, written := got[last]; !written {
				got[last] = e.grant[len(tc.dcs)-1] // no document: its static limit
			}
			if got[last] != tc.limit {
				t.Errorf("%s's local limit = %d, want the whole limit %d (documents %v)", last, got[last], tc.limit, got)
			}
		})
	}
}

// TestPlannerIntegerInvariant moves random targets between random numbers
// of DCs (1 to 16) with random limits (1 to 10^9), watch delays and
// acknowledgements, and checks after every delivery that the local limits
// the DCs may enforce — what each applied last, and each write not yet
// applied — sum to at most the limit, and that a settled plan hands out
// exactly the limit.
func TestPlannerIntegerInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range 300 {
		n := 1 + rng.IntN(16)
		dcs := make([]string, n)
		for i := range dcs {
			dcs[i] = fmt.Sprintf("dc%d", i)
		}
		limit := int64(1 + rng.IntN(1_000_000_000))
		if iter%2 == 0 {
			limit = int64(1 + rng.IntN(20))
		}
		p, err := New(Config{DCs: dcs, Interval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		r := rule.Rule{Domain: "api", ID: "r", Limit: limit, WindowSeconds: 1, Scope: rule.ScopeGlobal, Enabled: true}
		p.SetRules([]rule.Rule{r})
		now := time.UnixMilli(1_700_000_000_000)
		p.Load(now, nil, nil, nil)
		e := p.rules[ruleRef{"api", "r"}].entry
		force := make([]int64, n)
		for d, dc := range dcs {
			force[d] = r.StaticLimit(dc, dcs, limit)
		}
		type pendingDoc struct {
			at    time.Time
			rev   int64
			local int64
		}
		inbox := make([][]pendingDoc, n)
		rev := int64(0)
		check := func(step int) {
			sum := int64(0)
			for d := range dcs {
				m := force[d]
				for _, q := range inbox[d] {
					m = max(m, q.local)
				}
				sum += m
			}
			if sum > limit {
				t.Fatalf("iteration %d step %d: %d DCs, L=%d: local limits that may be in force sum to %d (force %v)", iter, step, n, limit, sum, force)
			}
		}
		for step := range 100 {
			if step%10 == 0 && step < 50 {
				share := make([]float64, n)
				for d := range share {
					share[d] = rng.Float64()
				}
				norm := 0.0
				for _, v := range share {
					norm += v
				}
				for d := range share {
					share[d] /= norm
				}
				allocate.Apportion(share, limit, e.target)
			}
			now = now.Add(200 * time.Millisecond)
			for d := range dcs {
				q := inbox[d]
				for len(q) > 0 && !q[0].at.After(now) {
					force[d] = q[0].local
					p.SetAck(dcs[d], q[0].rev, now)
					q = q[1:]
					check(step)
				}
				inbox[d] = q
			}
			ws := p.Plan(now)
			if len(ws) > 0 {
				rev++
				for _, w := range ws {
					d := p.dcIndex[w.DC]
					at := now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
					if k := len(inbox[d]); k > 0 && inbox[d][k-1].at.After(at) {
						at = inbox[d][k-1].at
					}
					inbox[d] = append(inbox[d], pendingDoc{at, rev, w.Doc.GetLimit()})
				}
				p.Written(ws, rev, true)
			}
			p.Settle()
			check(step)
		}
		sum := int64(0)
		for d := range dcs {
			sum += force[d]
			if force[d] != e.target[d] {
				t.Fatalf("iteration %d: after settling, %s enforces %d, target %d", iter, dcs[d], force[d], e.target[d])
			}
		}
		if sum != limit {
			t.Fatalf("iteration %d: %d DCs, L=%d: settled local limits %v sum to %d, want exactly L", iter, n, limit, force, sum)
		}
	}
}
