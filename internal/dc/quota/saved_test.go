package quota_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/dc/quota"
)

// TestRestore checks that saved assignments cap their rules at
// min(static, saved) before the first listing, that a bad one only loses
// its cap, and that the listing replaces them.
func TestRestore(t *testing.T) {
	clk := newClock()
	tb := newTable(t, clk)
	r := globalRule("r", nil) // static just under 1/2
	static := r.Spec.StaticShare(dc, dcs)
	assign := func(id string, share float64, keys ...quota.KeyShare) quota.Assignment {
		return *put(1, id, share, keys...).Assignment
	}
	saved := []quota.Assignment{
		assign("low", 0.1, quota.KeyShare{Key: "k", Share: 0.05}),
		assign("high", 0.9),
		assign("neg", -0.1),    // not a share: skipped
		assign("low", 0.2),     // saved twice: skipped
		{DC: "b", Domain: "d"}, // another DC's: skipped
		assign("gone", 0.1),
	}
	saved[4].RuleID = "other"
	n, err := tb.Restore(saved)
	if err != nil || n != 3 {
		t.Fatalf("Restore: got %d, %v; want 3 rules restored", n, err)
	}
	for _, c := range []struct {
		id, key string
		want    float64
	}{
		{"low", "", 0.1},
		{"low", "k", 0.05},
		{"low", "other-key", 0.1},
		{"high", "", static}, // min(static, 0.9)
		{"gone", "", 0.1},
		{"neg", "", static}, // no cap
		{"other", "", static},
		{"unsaved", "", static},
	} {
		if got := tb.Share("d", globalRule(c.id, nil), c.key); got != c.want {
			t.Errorf("restored Share(%s, %q): got %v, want %v", c.id, c.key, got, c.want)
		}
	}
	if tb.Synced() {
		t.Error("Synced after Restore; want false until a listing")
	}
	if _, rev := tb.Applied(); rev != 0 {
		t.Errorf("Applied after Restore: got revision %d, want 0 (a saved state acknowledges nothing)", rev)
	}
	if st := tb.Stats(); st.Corrupt != 3 {
		t.Errorf("Stats.Corrupt: got %d, want the 3 skipped saved assignments", st.Corrupt)
	}

	// The listing replaces the saved state whole, as if nothing had been
	// restored: a rule it lacks takes its static share (the saved 0.1 of
	// "gone" is no cap any more), and a corrupt listed document falls back
	// to 0, not to the saved version, which may predate a decrease.
	tb.Reset(10, []quota.Change{
		put(5, "low", 0.4),
		corrupt(7, "high", func(c *quota.Change) { c.Assignment.Share = 2 }),
		leasePut(6, clk.Now().Add(time.Hour), time.Hour),
	})
	for _, c := range []struct {
		id, key string
		want    float64
	}{
		{"low", "k", 0.4},
		{"high", "", 0},
		{"gone", "", static},
	} {
		if got := tb.Share("d", globalRule(c.id, nil), c.key); got != c.want {
			t.Errorf("after the listing, Share(%s, %q): got %v, want %v", c.id, c.key, got, c.want)
		}
	}
	if _, rev := tb.Applied(); rev != 6 {
		t.Errorf("after the listing, Applied: revision %d, want 6 (below high's corrupt document)", rev)
	}
	if _, err := tb.Restore(saved); !errors.Is(err, quota.ErrSynced) {
		t.Errorf("Restore after a listing: got %v, want ErrSynced", err)
	}
}

// TestAssignmentsRoundTrip checks that what a Table saves restores, in a
// new Table, the limits it had in force, each capped by the static share.
func TestAssignmentsRoundTrip(t *testing.T) {
	clk := newClock()
	src := newTable(t, clk)
	src.Reset(20, []quota.Change{
		put(3, "a", 0.3, quota.KeyShare{Key: "k1", Share: 0.02}, quota.KeyShare{Key: "k2", Share: 0.9}),
		put(4, "b", 0.05),
		leasePut(5, clk.Now().Add(time.Hour), time.Hour),
	})
	src.Apply(21, []quota.Change{corrupt(21, "b", func(c *quota.Change) { c.Assignment.Share = math.NaN() })})
	src.Apply(22, []quota.Change{corrupt(22, "never", func(c *quota.Change) { c.Assignment.Share = 2 })})
	rev, as := src.Assignments()
	if rev != 20 {
		t.Errorf("Assignments: revision %d, want 20 (held below b's corrupt document)", rev)
	}
	if len(as) != 3 || as[0].RuleID != "a" || as[1].RuleID != "b" || as[2].RuleID != "never" || len(as[0].Keys) != 2 || as[0].Keys[0].Key != "k1" {
		t.Fatalf("Assignments: got %+v, want a (keys k1, k2), b's last valid one and the never valid one, in order", as)
	}
	dst := newTable(t, clk)
	if n, err := dst.Restore(as); err != nil || n != 3 {
		t.Fatalf("Restore: got %d, %v", n, err)
	}
	static := globalRule("x", nil).Spec.StaticShare(dc, dcs)
	for _, c := range []struct {
		id, key string
		want    float64
	}{
		{"a", "", 0.3}, {"a", "k1", 0.02}, {"a", "k2", static}, {"b", "", 0.05},
		{"never", "", 0}, // a document exists that was never valid: 0, before and after

	} {
		r := globalRule(c.id, nil)
		if got := dst.Share("d", r, c.key); got != c.want || got != min(src.Share("d", r, c.key), static) {
			t.Errorf("Share(%s, %q) after the round trip: got %v, want %v = min(static, %v before)", c.id, c.key, got, c.want, src.Share("d", r, c.key))
		}
	}
}
