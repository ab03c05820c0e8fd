package etcdquota

import (
	"log/slog"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/dc/quota"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/etcd/listwatch"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Whatever bytes sit at a DC's keys in etcd, the share a limiter enforces
// stays in [0, 1], and a document that is refused never gives more than the
// static share.
func FuzzDocument(f *testing.F) {
	good, _ := proto.Marshal(&weirv1.RuleAssignment{Dc: "a", Domain: "d", RuleId: "r", Share: 0.9, Keys: []*weirv1.KeyShare{{Key: "k", Share: 1}}})
	lease, _ := proto.Marshal(&weirv1.AssignmentLease{Dc: "a", ValidUntilMs: math.MaxInt64, TtlMs: math.MaxInt64})
	f.Add(false, good, lease)
	f.Add(false, []byte{0xff, 0x01}, lease)
	f.Add(true, lease, good)
	f.Add(false, []byte{0x29, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f}, lease) // share NaN
	f.Fuzz(func(t *testing.T, asLease bool, value, leaseValue []byte) {
		var l etcdlayout.Layout
		tbl, err := quota.New(quota.Config{DC: "a", DCs: []string{"a", "b"}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		a := &Agent{cfg: Config{Layout: l}, dc: "a", table: tbl, log: slog.New(slog.DiscardHandler)}
		key := l.Assignment("a", "d", "r")
		if asLease {
			key = l.Lease("a")
		}
		c1, ok1 := a.change(listwatch.Event{Key: []byte(key), Value: value, Revision: 2})
		c2, ok2 := a.change(listwatch.Event{Key: []byte(l.Lease("a")), Value: leaseValue, Revision: 3})
		var changes []quota.Change
		if ok1 {
			changes = append(changes, c1)
		}
		if ok2 {
			changes = append(changes, c2)
		}
		tbl.Reset(3, changes)
		r := &ruleset.Rule{Spec: rule.Rule{ID: "r", Domain: "d", Scope: rule.ScopeGlobal, Limit: 100, WindowSeconds: 1}}
		static := r.Spec.StaticShare("a", []string{"a", "b"})
		for _, key := range []string{"", "k", "other"} {
			s := tbl.Share("d", r, key)
			if !(s >= 0 && s <= 1) {
				t.Fatalf("share %v for key %q", s, key)
			}
			if ok1 && c1.Err != nil && s > static {
				t.Fatalf("refused document (%v) gave share %v > static %v", c1.Err, s, static)
			}
		}
	})
}
