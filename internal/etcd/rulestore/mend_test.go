package rulestore

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/etcd/listwatch"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/internal/testkit/wait"
	"github.com/weirhq/weir/pkg/rule"
)

// TestMendRestoresShadowFromMemory corrupts both a rule's document and its
// shadow (or deletes the shadow) under a mirroring Watcher that had the
// rule in force, as in the audit of docs/operations.md: a Watcher started
// afterwards does not enforce the rule, MendShadows under a fence that
// does not hold writes nothing, and under one that holds puts the version
// the mirror holds in memory back as the shadow, which the later Watcher
// then enforces.
func TestMendRestoresShadowFromMemory(t *testing.T) {
	junk := strings.Repeat("x", 300_000)
	for _, tc := range []struct {
		name    string
		corrupt func(ctx context.Context, cli *clientv3.Client, l etcdlayout.Layout) error
	}{
		{"shadow corrupt", func(ctx context.Context, cli *clientv3.Client, l etcdlayout.Layout) error {
			_, err := cli.Txn(ctx).Then(clientv3.OpPut(l.Rule("api", "tenant-daily"), junk), clientv3.OpPut(l.ValidRule("api", "tenant-daily"), "garbage")).Commit()
			return err
		}},
		{"shadow missing", func(ctx context.Context, cli *clientv3.Client, l etcdlayout.Layout) error {
			_, err := cli.Txn(ctx).Then(clientv3.OpPut(l.Rule("api", "tenant-daily"), junk), clientv3.OpDelete(l.ValidRule("api", "tenant-daily"))).Commit()
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			etcd := etcdtest.Start(t)
			cli := etcd.Client(t)
			ctx := context.Background()
			var l etcdlayout.Layout
			putRule(t, cli, l, rule.Rule{Domain: "api", ID: "tenant-daily", Limit: 5, WindowSeconds: 86400})
			m, mrec := startWatcher(t, cli, true)
			if err := tc.corrupt(ctx, cli, l); err != nil {
				t.Fatal(err)
			}
			wait.For(t, 10*time.Second, "the mirror holding the rule from memory", func() bool {
				h, ok := m.HeldRule("api", "tenant-daily")
				return ok && h.Kept && !h.Shadowed
			})
			if got := mrec.limits()["api/tenant-daily"]; got != 5 {
				t.Fatalf("the mirror enforces limit %d, want 5 (its last valid version)", got)
			}

			late, rec := startWatcher(t, cli, false)
			if _, ok := rec.limits()["api/tenant-daily"]; ok {
				t.Fatalf("a watcher started after the corruption enforces the rule with no valid version in etcd")
			}
			if st := late.Stats(); st.Dropped != 1 {
				t.Fatalf("late watcher: got Dropped %d, want 1", st.Dropped)
			}

			// A fence that does not hold: nothing written, the mend kept.
			lresp, err := cli.Put(ctx, "/leader", "c1")
			if err != nil {
				t.Fatal(err)
			}
			stale := clientv3.Compare(clientv3.CreateRevision("/leader"), "=", lresp.Header.Revision+1000)
			if n, err := m.MendShadows(ctx, stale); n != 0 || !errors.Is(err, ErrFenced) {
				t.Fatalf("MendShadows under a stale fence: got %d, %v; want 0, ErrFenced", n, err)
			}
			if st := m.Stats(); st.Mended != 0 {
				t.Fatalf("mended %d under a stale fence, want 0", st.Mended)
			}

			fence := clientv3.Compare(clientv3.CreateRevision("/leader"), "=", lresp.Header.Revision)
			if n, err := m.MendShadows(ctx, fence); n != 1 || err != nil {
				t.Fatalf("MendShadows: got %d, %v; want 1, nil", n, err)
			}
			resp, err := cli.Get(ctx, l.ValidRule("api", "tenant-daily"))
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) != 1 {
				t.Fatalf("no shadow after the mend")
			}
			if r, err := Decode("api", "tenant-daily", resp.Kvs[0].Value); err != nil || r.Limit != 5 {
				t.Fatalf("shadow after the mend: got %+v, %v; want the last valid version, limit 5", r, err)
			}
			wait.For(t, 10*time.Second, "the late watcher enforcing the restored version", func() bool {
				return rec.limits()["api/tenant-daily"] == 5
			})
			if h, ok := late.HeldRule("api", "tenant-daily"); !ok || !h.Kept || !h.Shadowed {
				t.Errorf("late watcher: HeldRule = %+v, %v; want kept from the shadow", h, ok)
			}
			// The mirror sees the shadow it wrote and plans nothing more.
			wait.For(t, 10*time.Second, "the mirror holding the rule from its shadow", func() bool {
				h, _ := m.HeldRule("api", "tenant-daily")
				return h.Shadowed
			})
			if n, err := m.MendShadows(ctx, fence); n != 0 || err != nil {
				t.Errorf("MendShadows once mended: got %d, %v; want 0, nil", n, err)
			}
		})
	}
}

// TestMendNeverOverwritesANewerWrite plans a shadow restore from memory,
// then has a valid version written (as the admin API writes it) before
// the Watcher sees it: the mend finds the revisions changed and writes
// nothing.
func TestMendNeverOverwritesANewerWrite(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	var l etcdlayout.Layout
	w, err := New(Config{Client: cli, Apply: (&recorder{}).apply, Mirror: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// The Watcher is fed by hand, not run, so that it sees only what the
	// test gives it.
	feed := func() (int64, []listwatch.Event) {
		resp, err := cli.Get(ctx, l.RuleDocs(), clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		var evs []listwatch.Event
		for _, kv := range resp.Kvs {
			evs = append(evs, listwatch.Event{Key: kv.Key, Value: kv.Value, Revision: kv.ModRevision})
		}
		return resp.Header.Revision, evs
	}
	putRule(t, cli, l, rule.Rule{Domain: "api", ID: "login", Limit: 5, WindowSeconds: 60})
	(*handler)(w).Replace(feed())
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut(l.Rule("api", "login"), "junk"), clientv3.OpPut(l.ValidRule("api", "login"), "garbage")).Commit(); err != nil {
		t.Fatal(err)
	}
	(*handler)(w).Apply(feed())
	if h, ok := w.HeldRule("api", "login"); !ok || !h.Kept || h.Shadowed {
		t.Fatalf("HeldRule = %+v, %v; want kept from memory", h, ok)
	}
	putRule(t, cli, l, rule.Rule{Domain: "api", ID: "login", Limit: 9, WindowSeconds: 60})

	if n, err := w.MendShadows(ctx); n != 0 || err != nil {
		t.Fatalf("MendShadows over a newer write: got %d, %v; want 0, nil", n, err)
	}
	resp, err := cli.Get(ctx, l.ValidRule("api", "login"))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := Decode("api", "login", resp.Kvs[0].Value); err != nil || r.Limit != 9 {
		t.Errorf("shadow: got %+v, %v; want the newer write, limit 9", r, err)
	}
}
