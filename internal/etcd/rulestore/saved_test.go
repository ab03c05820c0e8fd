package rulestore

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestRestoreServesSavedRules: a Watcher saves the rules in force (a held
// rule at its last valid version); a new one that cannot reach etcd
// restores them, a bad saved rule left out; the first listing replaces
// them, and Restore is refused after it.
func TestRestoreServesSavedRules(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	var l etcdlayout.Layout
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	put := func(domain, id, doc string) {
		t.Helper()
		if _, err := cli.Put(ctx, l.Rule(domain, id), doc); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "rules.pb")
	run := func(rec *recorder) (*Watcher, func()) {
		w, err := New(Config{Client: cli, Apply: rec.apply, StateFile: path, Logger: slog.New(slog.DiscardHandler), MinBackoff: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		wctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		return w, func() { stop(); <-done }
	}

	put("api", "login", `{"rule_id":"login","limit":5,"window_seconds":60}`)
	put("shop", "cart", `{"rule_id":"cart","limit":3,"window_seconds":1}`)
	rec := &recorder{}
	w, stop := run(rec)
	waitFor(t, "both rules", func() bool { return len(rec.limits()) == 2 })
	put("api", "login", `{"rule_id":"login","limit":"many"}`) // held at 5
	waitFor(t, "the bad version seen", func() bool { return w.Stats().Invalid == 1 && w.Stats().Saves >= 2 })
	stop()

	st := &weirv1.RuleState{}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(data, st); err != nil || len(st.GetRules()) != 2 {
		t.Fatalf("saved state: %v, %v; want 2 rules", st, err)
	}
	// A hand-edited state: one rule made invalid, one added twice.
	st.Rules = append(st.Rules, &weirv1.SavedRule{Domain: "shop", RuleId: "bad", Document: []byte(`{"rule_id":"bad","limit":-1}`)}, st.Rules[0])
	if data, err = proto.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	etcd.Stop()
	rec = &recorder{}
	w, stop = run(rec)
	defer func() { stop() }()
	n, rev, err := w.Restore()
	if err != nil || n != 2 || rev != st.GetRevision() {
		t.Fatalf("Restore: %d rules at %d, %v; want 2 at %d", n, rev, err, st.GetRevision())
	}
	if got := rec.limits(); len(got) != 2 || got["api/login"] != 5 || got["shop/cart"] != 3 {
		t.Fatalf("restored: %v, want api/login=5 (the last valid version) and shop/cart=3", got)
	}
	if w.Stats().Invalid != 2 {
		t.Errorf("Stats.Invalid: %d, want the 2 bad saved rules", w.Stats().Invalid)
	}

	etcd.Restart()
	put("shop", "cart", `{"rule_id":"cart","limit":4,"window_seconds":1}`)
	if err := w.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the listing", func() bool { return rec.limits()["shop/cart"] == 4 })
	if _, _, err := w.Restore(); !errors.Is(err, ErrListed) {
		t.Errorf("Restore after the listing: %v, want ErrListed", err)
	}
}

// TestRestoreBadFile: a state file that is not one is an error, and
// nothing is applied.
func TestRestoreBadFile(t *testing.T) {
	etcd := etcdtest.Start(t)
	path := filepath.Join(t.TempDir(), "rules.pb")
	if err := os.WriteFile(path, []byte("\xff\xff not a protobuf"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	w, err := New(Config{Client: etcd.Client(t), Apply: rec.apply, StateFile: path, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, err := w.Restore(); err == nil || n != 0 || rec.n != 0 {
		t.Errorf("Restore of a bad file: %d rules, %v, %d applies; want an error and nothing applied", n, err, rec.n)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if n, _, err := w.Restore(); err != nil || n != 0 || rec.n != 0 {
		t.Errorf("Restore without a file: %d rules, %v, %d applies; want nothing, no error", n, err, rec.n)
	}
}
