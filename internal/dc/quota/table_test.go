package quota_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/dc/quota"
	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

var _ limiter.Quotas = (*quota.Table)(nil)

// newClock returns the tests' fake clock.
func newClock() *fakeclock.Clock { return fakeclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) }

const dc = "a"

var dcs = []string{"a", "b"}

func newTable(t testing.TB, clk *fakeclock.Clock) *quota.Table {
	t.Helper()
	tb, err := quota.New(quota.Config{
		DC:     dc,
		DCs:    dcs,
		Now:    clk.Now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func globalRule(id string, shares map[string]float64) *ruleset.Rule {
	return &ruleset.Rule{Spec: rule.Rule{ID: id, Domain: "d", Scope: rule.ScopeGlobal, Shares: shares, Limit: 100, WindowSeconds: 1}}
}

// put is a put of the assignment of rule id in domain d.
func put(rev int64, id string, share float64, keys ...quota.KeyShare) quota.Change {
	return quota.Change{Domain: "d", RuleID: id, Revision: rev, Assignment: &quota.Assignment{
		DC: dc, Domain: "d", RuleID: id, Epoch: uint64(rev), Share: share, Keys: keys,
	}}
}

func del(rev int64, id string) quota.Change {
	return quota.Change{Domain: "d", RuleID: id, Revision: rev, Delete: true}
}

// leasePut is a put of the lease, valid for ttl from reception and until
// the coordinator's clock reads until.
func leasePut(rev int64, until time.Time, ttl time.Duration) quota.Change {
	return quota.Change{Revision: rev, Lease: &quota.Lease{DC: dc, Epoch: uint64(rev), ValidUntil: until, TTL: ttl}}
}

// corrupt returns a put of rule id whose document fails a check, made by
// edit from a valid one.
func corrupt(rev int64, id string, edit func(c *quota.Change)) quota.Change {
	c := put(rev, id, 0.1, quota.KeyShare{Key: "k", Share: 0.1})
	edit(&c)
	return c
}

func TestShare(t *testing.T) {
	plain := globalRule("r", nil)                           // static 1/2
	pinned := globalRule("r", map[string]float64{"a": 0.3}) // static 0.3
	local := &ruleset.Rule{Spec: rule.Rule{ID: "r", Domain: "d", Scope: rule.ScopeLocal, Limit: 100, WindowSeconds: 1}}
	half := plain.Spec.StaticShare(dc, dcs)
	if half > 0.5 || half < 0.4999 {
		t.Fatalf("static share of a plain rule among 2 DCs: got %v, want just under 0.5", half)
	}
	static3 := pinned.Spec.StaticShare(dc, dcs)

	// lease is a lease put at revision 1 valid for 10 s.
	lease := func(clk *fakeclock.Clock) quota.Change { return leasePut(1, clk.Now().Add(time.Hour), 10*time.Second) }
	tests := []struct {
		name string
		rule *ruleset.Rule
		key  string
		// setup fills the table; it is synced first with list.
		// list, apply and relist change the table in this order, when
		// set: Reset(10, list), Apply(20, apply), Reset(30, relist).
		list, apply, relist func(clk *fakeclock.Clock) []quota.Change
		after               time.Duration // clock advance before Share
		want                float64
	}{
		{name: "not synced: static", rule: plain, want: half},
		{name: "no document: static", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk)} }, want: half},
		{name: "no document, rule with static shares", rule: pinned,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk)} }, want: static3},
		{name: "document above static", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.8)} }, want: 0.8},
		{name: "document below static", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.2)} }, want: 0.2},
		{name: "document of another rule: static", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "other", 0.9)} }, want: half},
		{name: "document of another domain: static", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change {
				c := put(2, "r", 0.9)
				c.Domain, c.Assignment.Domain = "e", "e"
				return []quota.Change{lease(clk), c}
			}, want: half},
		{name: "key with its own share", rule: plain, key: "hot",
			list: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{lease(clk), put(2, "r", 0.2, quota.KeyShare{Key: "hot", Share: 0.95})}
			}, want: 0.95},
		{name: "key not listed takes the rule's share", rule: plain, key: "cold",
			list: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{lease(clk), put(2, "r", 0.2, quota.KeyShare{Key: "hot", Share: 0.95})}
			}, want: 0.2},
		{name: "empty key can be listed", rule: plain, key: "",
			list: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{lease(clk), put(2, "r", 0.2, quota.KeyShare{Key: "", Share: 0.6})}
			}, want: 0.6},
		{name: "share 0", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0)} }, want: 0},
		{name: "share 1", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 1)} }, want: 1},
		{name: "local rule: 1", rule: local,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.2)} }, want: 1},
		{name: "local rule without lease: 1", rule: local, want: 1},

		{name: "lease never received: min(static, assigned above)", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{put(2, "r", 0.8)} }, want: half},
		{name: "lease never received: min(static, assigned below)", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{put(2, "r", 0.2)} }, want: 0.2},
		{name: "lease never received: key share capped", rule: plain, key: "hot",
			list: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{put(2, "r", 0.2, quota.KeyShare{Key: "hot", Share: 0.95})}
			}, want: half},
		{name: "lease never received, no document: static", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change { return nil }, want: half},
		{name: "lease TTL from reception run out", rule: plain, after: 10 * time.Second,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.8)} }, want: half},
		{name: "lease TTL just not run out", rule: plain, after: 10*time.Second - time.Nanosecond,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.8)} }, want: 0.8},
		{name: "lease run out: assigned below static stays", rule: plain, after: time.Minute,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.2)} }, want: 0.2},
		{name: "lease run out: key share capped", rule: pinned, key: "hot", after: time.Minute,
			list: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{lease(clk), put(2, "r", 0.2, quota.KeyShare{Key: "hot", Share: 0.95})}
			}, want: static3},
		{name: "lease valid_until passed first", rule: plain, after: 2 * time.Second,
			list: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{leasePut(1, clk.Now().Add(time.Second), time.Minute), put(2, "r", 0.8)}
			}, want: half},
		{name: "lease valid_until already passed on reception", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{leasePut(1, clk.Now().Add(-time.Millisecond), time.Minute), put(2, "r", 0.8)}
			}, want: half},
		{name: "lease TTL 0", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{leasePut(1, clk.Now().Add(time.Hour), 0), put(2, "r", 0.8)}
			}, want: half},
		{name: "lease renewed", rule: plain, after: 7 * time.Second, // 15 s after the first lease
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.8)} },
			apply: func(clk *fakeclock.Clock) []quota.Change {
				clk.Advance(8 * time.Second)
				return []quota.Change{leasePut(3, clk.Now().Add(time.Hour), 10*time.Second)}
			}, want: 0.8},
		{name: "lease deleted", rule: plain,
			list:  func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.8)} },
			apply: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{{Revision: 3, Delete: true}} }, want: half},
		{name: "lease of another DC is corrupt: no lease", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change {
				l := lease(clk)
				l.Lease.DC = "b"
				return []quota.Change{l, put(2, "r", 0.8)}
			}, want: half},
		{name: "lease negative TTL is corrupt", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{leasePut(1, clk.Now().Add(time.Hour), -time.Second), put(2, "r", 0.8)}
			}, want: half},
		{name: "undecodable lease replaces a good one", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.8)} },
			apply: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{{Revision: 3, Err: errors.New("proto: cannot parse")}}
			}, want: half},

		{name: "corrupt after a share above static: static", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.8)} },
			apply: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{corrupt(3, "r", func(c *quota.Change) { c.Assignment.Share = math.NaN() })}
			}, want: half},
		{name: "corrupt after a share below static: previous", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.2)} },
			apply: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{corrupt(3, "r", func(c *quota.Change) { c.Assignment.Share = 2 })}
			}, want: 0.2},
		{name: "corrupt keeps previous key shares, capped", rule: plain, key: "hot",
			list: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{lease(clk), put(2, "r", 0.8, quota.KeyShare{Key: "hot", Share: 0.1})}
			},
			apply: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{corrupt(3, "r", func(c *quota.Change) { c.Err = errors.New("bad wire type") })}
			}, want: 0.1},
		{name: "two corrupt in a row keep the last valid share", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.3)} },
			apply: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{
					corrupt(3, "r", func(c *quota.Change) { c.Assignment.Share = -1 }),
					corrupt(4, "r", func(c *quota.Change) { c.Assignment.DC = "b" }),
				}
			}, want: 0.3},
		{name: "corrupt without any previous: 0", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{lease(clk), corrupt(2, "r", func(c *quota.Change) { c.Err = errors.New("bad") })}
			}, want: 0},
		{name: "valid after corrupt: in force", rule: plain,
			list: func(clk *fakeclock.Clock) []quota.Change {
				return []quota.Change{lease(clk), corrupt(2, "r", func(c *quota.Change) { c.Err = errors.New("bad") })}
			},
			apply: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{put(3, "r", 0.7)} }, want: 0.7},
		{name: "deleted after a share above static: static", rule: plain,
			list:  func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.8)} },
			apply: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{del(3, "r")} }, want: half},
		{name: "deleted after a share below static: previous", rule: plain,
			list:  func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.2)} },
			apply: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{del(3, "r")} }, want: 0.2},
		{name: "deleted then put again", rule: plain,
			list:  func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.2)} },
			apply: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{del(3, "r"), put(4, "r", 0.9)} }, want: 0.9},
		{name: "delete of an unknown document: static", rule: plain,
			list:  func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk)} },
			apply: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{del(3, "r")} }, want: half},
		{name: "unlisted on re-list: as deleted", rule: plain,
			list:   func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.2)} },
			relist: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk)} }, want: 0.2},
		{name: "listed again unchanged on re-list", rule: plain,
			list:   func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.8)} },
			relist: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.8)} }, want: 0.8},
		{name: "changed while not watching, on re-list", rule: plain,
			list:   func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.8)} },
			relist: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(25, "r", 0.6)} }, want: 0.6},
		{name: "lease gone on re-list", rule: plain,
			list:   func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{lease(clk), put(2, "r", 0.8)} },
			relist: func(clk *fakeclock.Clock) []quota.Change { return []quota.Change{put(2, "r", 0.8)} }, want: half},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			tb := newTable(t, clk)
			if tt.list != nil {
				tb.Reset(10, tt.list(clk))
			}
			if tt.apply != nil {
				tb.Apply(20, tt.apply(clk))
			}
			if tt.relist != nil {
				tb.Reset(30, tt.relist(clk))
			}
			clk.Advance(tt.after)
			if got := tb.Share("d", tt.rule, tt.key); got != tt.want {
				t.Errorf("Share: got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHasKeyShare(t *testing.T) {
	clk := newClock()
	tb := newTable(t, clk)
	tb.Reset(10, []quota.Change{put(2, "r", 0.5, quota.KeyShare{Key: "hot", Share: 0.9}), put(3, "s", 0.5)})
	tests := []struct {
		rule, key string
		want      bool
	}{
		{"r", "hot", true},
		{"r", "cold", false},
		{"s", "hot", false},
		{"none", "hot", false},
	}
	for _, tt := range tests {
		if got := tb.HasKeyShare("d", tt.rule, tt.key); got != tt.want {
			t.Errorf("HasKeyShare(d, %s, %s): got %v, want %v", tt.rule, tt.key, got, tt.want)
		}
	}
	// A capped rule keeps its last keys: they still have shares of their own.
	tb.Apply(0, []quota.Change{corrupt(11, "r", func(c *quota.Change) { c.Err = errors.New("bad") })})
	if !tb.HasKeyShare("d", "r", "hot") {
		t.Error("HasKeyShare after a corrupt document: got false, want true")
	}
}

func TestCorruptDocumentsAreCounted(t *testing.T) {
	long := strings.Repeat("x", quota.MaxKeyLen+1)
	tooMany := make([]quota.KeyShare, quota.MaxKeys+1)
	for i := range tooMany {
		tooMany[i] = quota.KeyShare{Key: strings.Repeat("k", 1+i%7) + string(rune('a'+i%26)), Share: 0.1}
	}
	tests := []struct {
		name string
		edit func(c *quota.Change)
	}{
		{"undecodable", func(c *quota.Change) { c.Err = errors.New("proto: cannot parse invalid wire-format data") }},
		{"no assignment", func(c *quota.Change) { c.Assignment = nil }},
		{"share NaN", func(c *quota.Change) { c.Assignment.Share = math.NaN() }},
		{"share negative", func(c *quota.Change) { c.Assignment.Share = -0.1 }},
		{"share above 1", func(c *quota.Change) { c.Assignment.Share = 1.0000001 }},
		{"share +Inf", func(c *quota.Change) { c.Assignment.Share = math.Inf(1) }},
		{"other DC", func(c *quota.Change) { c.Assignment.DC = "b" }},
		{"other domain", func(c *quota.Change) { c.Assignment.Domain = "e" }},
		{"other rule", func(c *quota.Change) { c.Assignment.RuleID = "s" }},
		{"key share NaN", func(c *quota.Change) { c.Assignment.Keys[0].Share = math.NaN() }},
		{"key share above 1", func(c *quota.Change) { c.Assignment.Keys[0].Share = 3 }},
		{"duplicate key", func(c *quota.Change) {
			c.Assignment.Keys = append(c.Assignment.Keys, quota.KeyShare{Key: "k", Share: 0.1})
		}},
		{"key too long", func(c *quota.Change) { c.Assignment.Keys[0].Key = long }},
		{"too many keys", func(c *quota.Change) { c.Assignment.Keys = tooMany }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			tb := newTable(t, clk)
			r := globalRule("r", nil)
			tb.Reset(10, []quota.Change{leasePut(1, clk.Now().Add(time.Hour), time.Minute), put(2, "r", 0.9)})
			tb.Apply(0, []quota.Change{corrupt(11, "r", tt.edit)})
			st := tb.Stats()
			if st.Corrupt != 1 || st.Capped != 1 {
				t.Errorf("Stats: got Corrupt %d Capped %d, want 1 and 1", st.Corrupt, st.Capped)
			}
			if got, want := tb.Share("d", r, "k"), r.Spec.StaticShare(dc, dcs); got != want {
				t.Errorf("Share: got %v, want min(static, 0.9) = %v", got, want)
			}
			if _, rev := tb.Applied(); rev != 10 {
				t.Errorf("Applied revision: got %d, want 10 (held below the corrupt document at 11)", rev)
			}
		})
	}
}

func TestAppliedHoldsBelowCorruptDocuments(t *testing.T) {
	clk := newClock()
	tb := newTable(t, clk)
	bad := func(rev int64, id string) quota.Change {
		return corrupt(rev, id, func(c *quota.Change) { c.Err = errors.New("bad") })
	}
	check := func(step string, wantEpoch uint64, wantRev int64) {
		t.Helper()
		if e, r := tb.Applied(); e != wantEpoch || r != wantRev {
			t.Errorf("%s: Applied got (%d, %d), want (%d, %d)", step, e, r, wantEpoch, wantRev)
		}
	}
	check("new", 0, 0)
	tb.Reset(10, []quota.Change{put(4, "r", 0.5), put(7, "s", 0.5)})
	check("list", 7, 10)
	tb.Apply(0, []quota.Change{put(12, "r", 0.4)})
	check("put", 12, 12)
	tb.Apply(0, []quota.Change{bad(15, "r")})
	check("corrupt", 12, 14)
	tb.Apply(0, []quota.Change{put(16, "s", 0.1)})
	check("other rule after corrupt", 16, 14)
	tb.Apply(0, []quota.Change{bad(18, "r")})
	check("second corrupt of the same rule", 16, 14)
	tb.Apply(40, nil)
	check("progress", 16, 14)
	tb.Apply(0, []quota.Change{bad(41, "t")})
	check("corrupt of a new rule", 16, 14)
	tb.Apply(0, []quota.Change{put(42, "r", 0.2)})
	check("valid document of r", 42, 40)
	tb.Apply(0, []quota.Change{del(43, "t")})
	check("corrupt rule deleted", 42, 43)
	tb.Apply(50, nil)
	check("progress", 42, 50)

	// A re-list keeps the hold of a corrupt document it lists again, and
	// does not count it twice.
	tb.Apply(0, []quota.Change{bad(51, "s")})
	check("corrupt before re-list", 42, 50)
	before := tb.Stats().Corrupt
	tb.Reset(60, []quota.Change{put(42, "r", 0.2), bad(51, "s")})
	check("re-list", 42, 50)
	if got := tb.Stats().Corrupt; got != before {
		t.Errorf("corrupt count after re-list: got %d, want %d", got, before)
	}
	tb.Reset(61, []quota.Change{put(42, "r", 0.2)})
	check("re-list without the corrupt document", 42, 61)
}

func TestResetKeepsTheLeaseReceptionTime(t *testing.T) {
	clk := newClock()
	tb := newTable(t, clk)
	r := globalRule("r", nil)
	l := leasePut(1, clk.Now().Add(time.Hour), 10*time.Second)
	tb.Reset(10, []quota.Change{l, put(2, "r", 0.8)})
	clk.Advance(9 * time.Second)
	tb.Reset(20, []quota.Change{l, put(2, "r", 0.8)}) // same lease, listed again
	if got := tb.Share("d", r, ""); got != 0.8 {
		t.Fatalf("Share after 9s: got %v, want 0.8", got)
	}
	clk.Advance(time.Second)
	if got, want := tb.Share("d", r, ""), r.Spec.StaticShare(dc, dcs); got != want {
		t.Errorf("Share 10s after the first reception: got %v, want %v (the re-list must not extend the lease)", got, want)
	}
	if tb.Stats().LeaseInForce {
		t.Error("Stats.LeaseInForce: got true, want false")
	}
	// A new revision of the lease is a new reception.
	tb.Reset(30, []quota.Change{leasePut(25, clk.Now().Add(time.Hour), 10*time.Second), put(2, "r", 0.8)})
	if got := tb.Share("d", r, ""); got != 0.8 {
		t.Errorf("Share after a new lease: got %v, want 0.8", got)
	}
}

func TestSynced(t *testing.T) {
	tb := newTable(t, newClock())
	if tb.Synced() {
		t.Fatal("Synced before Reset: got true, want false")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := tb.WaitSynced(ctx); !errors.Is(err, quota.ErrNotSynced) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitSynced before Reset: got %v, want ErrNotSynced and DeadlineExceeded", err)
	}
	done := make(chan error)
	go func() { done <- tb.WaitSynced(context.Background()) }()
	tb.Apply(5, nil) // not a sync
	tb.Reset(5, nil)
	if err := <-done; err != nil {
		t.Fatalf("WaitSynced: got %v, want nil", err)
	}
	tb.Reset(6, nil) // a second Reset must not close the channel twice
	if !tb.Synced() || tb.WaitSynced(ctx) != nil {
		t.Error("after Reset: want Synced and WaitSynced nil")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  quota.Config
		ok   bool
	}{
		{"ok", quota.Config{DC: "a", DCs: []string{"a", "b"}}, true},
		{"no DC", quota.Config{DCs: []string{"a"}}, false},
		{"DC not listed", quota.Config{DC: "c", DCs: []string{"a", "b"}}, false},
		{"no DCs", quota.Config{DC: "a"}, false},
		{"bad DC name", quota.Config{DC: "a", DCs: []string{"a", "B/x"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok {
				t.Errorf("Validate: got %v, want ok %v", err, tt.ok)
			}
			if _, err := quota.New(tt.cfg); (err == nil) != tt.ok {
				t.Errorf("New: got %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// TestConcurrentShareAndApply is for the race detector: Share, Stats and
// Applied run while Apply swaps snapshots.
func TestConcurrentShareAndApply(t *testing.T) {
	clk := newClock()
	tb := newTable(t, clk)
	r := globalRule("r", nil)
	tb.Reset(1, []quota.Change{leasePut(1, clk.Now().Add(time.Hour), time.Hour)})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Every share written is a multiple of 0.1 in [0, 0.9].
				for _, key := range []string{"", "k"} {
					v := tb.Share("d", r, key)
					if v < 0 || v > 0.9 || math.Abs(v*10-math.Round(v*10)) > 1e-9 {
						t.Errorf("Share: got %v, want one of the shares written", v)
						return
					}
				}
				tb.Stats()
				tb.Applied()
			}
		})
	}
	for i := range int64(2000) {
		v := float64(i%10) / 10
		tb.Apply(0, []quota.Change{put(2+i, "r", v, quota.KeyShare{Key: "k", Share: v})})
	}
	close(stop)
	wg.Wait()
}
