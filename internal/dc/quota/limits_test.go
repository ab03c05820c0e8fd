package quota_test

import (
	"testing"
	"time"

	"github.com/weirhq/weir/internal/dc/quota"
	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

// putLimit is a put of rule id's assignment with integer limits.
func putLimit(rev int64, id string, local, global int64, keys ...quota.KeyShare) quota.Change {
	c := put(rev, id, float64(local)/float64(global), keys...)
	c.Assignment.Limit, c.Assignment.GlobalLimit = local, global
	return c
}

// The limiter enforces the integer it is sent; documents without one keep
// floor(share × limit); a limit that is not the one apportioned is scaled
// down; past the lease, no more than the static limit.
func TestLimits(t *testing.T) {
	r := globalRule("r", nil) // limit 100; static 50 of 100 among a and b
	r.Spec.Burst = 10
	lease := func(clk *fakeclock.Clock) quota.Change { return leasePut(1, clk.Now().Add(time.Hour), 10*time.Second) }
	tests := []struct {
		name         string
		key          string
		limit, burst int64
		docs         func(clk *fakeclock.Clock) []quota.Change
		after        time.Duration
		want, wantB  int64
	}{
		{"no document: static limit", "", 100, 10, func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk)} }, 0, 50, 5},
		{"the integer sent", "", 100, 10, func(clk *fakeclock.Clock) []quota.Change {
			return []quota.Change{lease(clk), putLimit(2, "r", 67, 100)}
		}, 0, 67, 6},
		{"the whole limit", "", 100, 10, func(clk *fakeclock.Clock) []quota.Change {
			return []quota.Change{lease(clk), putLimit(2, "r", 100, 100)}
		}, 0, 100, 10},
		{"an old document: floor(share × limit)", "", 100, 10, func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.675)} }, 0, 67, 6},
		{"an override's limit: scaled down", "", 7, 0, func(clk *fakeclock.Clock) []quota.Change {
			return []quota.Change{lease(clk), putLimit(2, "r", 67, 100)}
		}, 0, 4, 0},
		{"a key's own integer", "hot", 100, 10, func(clk *fakeclock.Clock) []quota.Change {
			return []quota.Change{lease(clk), putLimit(2, "r", 10, 100, quota.KeyShare{Key: "hot", Share: 0.97, Limit: 97, GlobalLimit: 100})}
		}, 0, 97, 9},
		{"lease run out: the lesser of static and assigned", "", 100, 10, func(clk *fakeclock.Clock) []quota.Change {
			return []quota.Change{lease(clk), putLimit(2, "r", 67, 100)}
		}, time.Minute, 50, 5},
		{"lease run out, below static: assigned", "", 100, 10, func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), putLimit(2, "r", 3, 100)} }, time.Minute, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			tb := newTable(t, clk)
			tb.Reset(10, tt.docs(clk))
			clk.Advance(tt.after)
			got, gotB := tb.Limits("d", r, tt.key, tt.limit, tt.burst)
			if got != tt.want || gotB != tt.wantB {
				t.Errorf("Limits(%d, %d) = %d, %d; want %d, %d", tt.limit, tt.burst, got, gotB, tt.want, tt.wantB)
			}
		})
	}
	local := &ruleset.Rule{Spec: rule.Rule{ID: "l", Domain: "d", Scope: rule.ScopeLocal, Limit: 9, WindowSeconds: 1}}
	if got, gotB := newTable(t, newClock()).Limits("d", local, "", 9, 3); got != 9 || gotB != 3 {
		t.Errorf("local rule: Limits = %d, %d; want 9, 3", got, gotB)
	}
}

// A lone DC enforces the whole limit before any document (its static
// limit), where a share of 0.9999999999999999 used to lose a unit.
func TestLimitsLoneDC(t *testing.T) {
	tb, err := quota.New(quota.Config{DC: "a", DCs: []string{"a"}, Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	r := &ruleset.Rule{Spec: rule.Rule{ID: "r", Domain: "d", Scope: rule.ScopeGlobal, Limit: 3, WindowSeconds: 300}}
	if got, _ := tb.Limits("d", r, "k", 3, 0); got != 3 {
		t.Errorf("lone DC: Limits = %d, want 3", got)
	}
}

func TestLimitsCorrupt(t *testing.T) {
	for name, c := range map[string]quota.Change{
		"local above global":     putLimit(2, "r", 101, 100),
		"negative local":         putLimit(2, "r", -1, 100),
		"key local above global": putLimit(2, "r", 1, 100, quota.KeyShare{Key: "k", Limit: 5, GlobalLimit: 4}),
	} {
		clk := newClock()
		tb := newTable(t, clk)
		tb.Reset(10, []quota.Change{leasePut(1, clk.Now().Add(time.Hour), 10*time.Second), c})
		if st := tb.Stats(); st.Corrupt != 1 {
			t.Errorf("%s: Corrupt = %d, want 1", name, st.Corrupt)
		}
	}
}
