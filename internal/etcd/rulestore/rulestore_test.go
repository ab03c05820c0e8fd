package rulestore

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/pkg/rule"
)

type recorder struct {
	mu   sync.Mutex
	sets []rule.Set
	n    int
}

func (r *recorder) apply(_ int64, sets []rule.Set) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sets, r.n = sets, r.n+1
	return nil
}

// limits returns domain/id → limit of the rules in force.
func (r *recorder) limits() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int64{}
	for _, s := range r.sets {
		for _, x := range s.Rules {
			out[s.Domain+"/"+x.ID] = x.Limit
		}
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatcherFollowsRules(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	var l etcdlayout.Layout
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	put := func(domain, id, doc string) {
		t.Helper()
		if _, err := cli.Put(ctx, l.Rule(domain, id), doc); err != nil {
			t.Fatal(err)
		}
	}
	put("api", "login", `{"rule_id":"login","limit":5,"window_seconds":60}`)
	put("api", "broken", `{"rule_id":"broken","limit":-1}`)
	rec := &recorder{}
	w, err := New(Config{Client: cli, Apply: rec.apply, Logger: slog.New(slog.DiscardHandler), MinBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() { stop(); <-done }()
	if err := w.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.limits(); len(got) != 1 || got["api/login"] != 5 {
		t.Fatalf("after the listing: %v, want only api/login=5", got)
	}
	if w.Stats().Invalid != 1 {
		t.Errorf("invalid = %d, want 1", w.Stats().Invalid)
	}

	start := time.Now()
	put("api", "login", `{"rule_id":"login","limit":7,"window_seconds":60}`)
	waitFor(t, "update applied", func() bool { return rec.limits()["api/login"] == 7 })
	t.Logf("a change reached the watcher in %v", time.Since(start))

	// An invalid new version is skipped: the previous one stays.
	put("api", "login", `{"rule_id":"login","limit":"many"}`)
	put("shop", "other", `{"rule_id":"x","limit":1,"window_seconds":1}`) // id differs from the key
	put("shop", "cart", `{"rule_id":"cart","domain":"shop","limit":3,"window_seconds":1}`)
	waitFor(t, "shop/cart applied", func() bool { return rec.limits()["shop/cart"] == 3 })
	if got := rec.limits(); got["api/login"] != 7 || len(got) != 2 {
		t.Fatalf("rules in force %v: want api/login=7 (its last valid version) and shop/cart=3", got)
	}
	if w.Stats().Invalid != 3 {
		t.Errorf("invalid = %d, want 3", w.Stats().Invalid)
	}

	if _, err := cli.Delete(ctx, l.Rule("shop", "cart")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "delete applied", func() bool { _, ok := rec.limits()["shop/cart"]; return !ok })

	// A compaction does not disturb the watch in progress.
	put("api", "login", `{"rule_id":"login","limit":9,"window_seconds":60}`)
	waitFor(t, "limit 9", func() bool { return rec.limits()["api/login"] == 9 })
	resp, err := cli.Put(ctx, "/unrelated", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	put("api", "login", `{"rule_id":"login","limit":11,"window_seconds":60}`)
	waitFor(t, "limit 11 after compaction", func() bool { return rec.limits()["api/login"] == 11 })
}

func TestPutBootstrapsWithoutOverwriting(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	var l etcdlayout.Layout
	if _, err := cli.Put(ctx, l.Rule("api", "a"), `{"rule_id":"a","limit":1,"window_seconds":1}`); err != nil {
		t.Fatal(err)
	}
	set := rule.Set{Domain: "api", Rules: []rule.Rule{{ID: "a", Limit: 100, WindowSeconds: 1}, {ID: "b", Limit: 2, WindowSeconds: 1}}}
	for i := range set.Rules {
		set.Rules[i].SetDefaults()
		set.Rules[i].Enabled = true
	}
	n, err := Put(ctx, cli, l, set, time.Now())
	if err != nil || n != 1 {
		t.Fatalf("Put = %d, %v; want 1 created", n, err)
	}
	resp, err := cli.Get(ctx, l.Rule("api", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := Decode("api", "a", resp.Kvs[0].Value); err != nil || r.Limit != 1 {
		t.Fatalf("existing rule overwritten: %+v %v", r, err)
	}
	resp, err = cli.Get(ctx, l.Rule("api", "b"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatal("b not created")
	}
	if r, err := Decode("api", "b", resp.Kvs[0].Value); err != nil || r.Limit != 2 || r.CreatedAt.IsZero() {
		t.Fatalf("b stored as %+v, %v", r, err)
	}
}
