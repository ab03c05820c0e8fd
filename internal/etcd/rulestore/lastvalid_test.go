package rulestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/internal/testkit/syncbuf"
	"github.com/weirhq/weir/internal/testkit/wait"
	"github.com/weirhq/weir/pkg/rule"
)

// startWatcher runs a Watcher until the test ends and waits for its first
// listing.
func startWatcher(t *testing.T, cli *clientv3.Client, mirror bool) (*Watcher, *recorder) {
	t.Helper()
	rec := &recorder{}
	w, err := New(Config{Client: cli, Apply: rec.apply, Mirror: mirror, Logger: slog.New(slog.DiscardHandler), MinBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.WaitSynced(sctx); err != nil {
		t.Fatal(err)
	}
	return w, rec
}

// startMender has w's planned shadow writes made as soon as they are
// planned, unfenced, until the test ends: a coordinator's leader does the
// same under its fence.
func startMender(t *testing.T, w *Watcher) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.Mends():
				if _, err := w.MendShadows(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("MendShadows: %v", err)
				}
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done })
}

func putRule(t *testing.T, cli *clientv3.Client, l etcdlayout.Layout, r rule.Rule) {
	t.Helper()
	r.SetDefaults()
	r.Enabled = true
	doc, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Txn(context.Background()).Then(PutOps(l, r.Domain, r.ID, doc)...).Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestNewWatcherHoldsLastValidVersion corrupts a rule's document after it
// was written the way the admin API writes it: a Watcher started
// afterwards enforces the last valid version and lists the rule as held,
// until the document is fixed or deleted.
func TestNewWatcherHoldsLastValidVersion(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	var l etcdlayout.Layout
	putRule(t, cli, l, rule.Rule{Domain: "api", ID: "login", Limit: 5, WindowSeconds: 60})
	putRule(t, cli, l, rule.Rule{Domain: "api", ID: "search", Limit: 50, WindowSeconds: 60})
	if _, err := cli.Put(ctx, l.Rule("api", "login"), `{"rule_id":"login","limit":"five"}`); err != nil {
		t.Fatal(err)
	}

	w, rec := startWatcher(t, cli, false)
	if got := rec.limits(); got["api/login"] != 5 || got["api/search"] != 50 || len(got) != 2 {
		t.Fatalf("rules in force %v, want api/login=5 (its last valid version) and api/search=50", got)
	}
	held := w.Held()
	if len(held) != 1 || held[0].ID != "login" || !held[0].Kept || held[0].Version.Limit != 5 || held[0].Reason == "" {
		t.Fatalf("Held() = %+v, want api/login kept at limit 5 with a reason", held)
	}
	if st := w.Stats(); st.Held != 1 || st.Dropped != 0 || st.Invalid != 1 {
		t.Errorf("stats %+v, want Held 1, Dropped 0, Invalid 1", st)
	}

	// Fixed: the new document is in force, nothing is held.
	putRule(t, cli, l, rule.Rule{Domain: "api", ID: "login", Limit: 6, WindowSeconds: 60})
	wait.For(t, 10*time.Second, "the fixed rule in force", func() bool { return rec.limits()["api/login"] == 6 })
	if held := w.Held(); len(held) != 0 {
		t.Errorf("Held() = %+v after the fix, want none", held)
	}

	// Corrupt again, then delete the document by hand: the rule is gone
	// although its shadow is still there.
	if _, err := cli.Put(ctx, l.Rule("api", "login"), `not json`); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the rule held", func() bool { return w.Stats().Held == 1 })
	if _, err := cli.Delete(ctx, l.Rule("api", "login")); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the deleted rule gone", func() bool { _, ok := rec.limits()["api/login"]; return !ok })
	if st := w.Stats(); st.Held != 0 {
		t.Errorf("held %d after the delete, want 0", st.Held)
	}
	_, rec2 := startWatcher(t, cli, false)
	if _, ok := rec2.limits()["api/login"]; ok {
		t.Errorf("a new watcher enforces the deleted rule from its orphaned shadow")
	}
}

// TestMirrorMendsShadows has a mirroring Watcher copy a document written by
// hand to its shadow, so that a later corruption still leaves a version
// for new processes, and delete the shadow of a rule deleted by hand.
func TestMirrorMendsShadows(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	var l etcdlayout.Layout
	if _, err := cli.Put(ctx, l.Rule("api", "login"), `{"rule_id":"login","limit":7,"window_seconds":60}`); err != nil {
		t.Fatal(err)
	}
	m, _ := startWatcher(t, cli, true)
	startMender(t, m)
	shadow := func() string {
		resp, err := cli.Get(ctx, l.ValidRule("api", "login"))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return ""
		}
		return string(resp.Kvs[0].Value)
	}
	wait.For(t, 10*time.Second, "the shadow written", func() bool { return strings.Contains(shadow(), `"limit":7`) })

	if _, err := cli.Put(ctx, l.Rule("api", "login"), `{"rule_id":"login","limit":-3}`); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the mirror held the rule", func() bool { return m.Stats().Held == 1 })
	if !strings.Contains(shadow(), `"limit":7`) {
		t.Fatalf("shadow %s after the corruption, want the last valid version", shadow())
	}
	_, rec := startWatcher(t, cli, false)
	if got := rec.limits()["api/login"]; got != 7 {
		t.Fatalf("a new watcher enforces limit %d, want 7", got)
	}

	if _, err := cli.Delete(ctx, l.Rule("api", "login")); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the orphaned shadow deleted", func() bool { return shadow() == "" })
	// The mirror counts a mend once its transaction has returned, which
	// may be a moment after etcd shows it.
	wait.For(t, 5*time.Second, "two mends counted", func() bool { return m.Stats().Mended >= 2 })
	if got := m.Stats().Mended; got != 2 {
		t.Errorf("mended %d, want 2", got)
	}
}

// TestEncodeRefusesWhatReadersSkip checks that Encode, the writers' gate,
// refuses every document Decode would skip.
func TestEncodeRefusesWhatReadersSkip(t *testing.T) {
	base := rule.Rule{Domain: "api", ID: "r", Limit: 5, WindowSeconds: 60}
	base.SetDefaults()
	huge := base
	huge.KeyType = rule.Dimensions{"user_id"}
	for i := range rule.MaxOverrides {
		huge.Overrides = append(huge.Overrides, rule.Override{Key: fmt.Sprintf("%0250d", i), Action: rule.ActionDeny})
	}
	if err := huge.Validate(); err != nil {
		t.Fatalf("the large rule is not valid: %v", err)
	}
	noID := base
	noID.ID = ""
	for _, tc := range []struct {
		name string
		r    rule.Rule
		ok   bool
	}{
		{"valid", base, true},
		{"larger than readers take", huge, false},
		{"no id", noID, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := Encode(tc.r)
			if got := err == nil; got != tc.ok {
				t.Fatalf("Encode: err %v, want ok %v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("err %v, want ErrInvalid", err)
			}
			if err == nil {
				if _, err := Decode(tc.r.Domain, tc.r.ID, doc); err != nil {
					t.Errorf("Decode of Encode's document: %v", err)
				}
			}
		})
	}
}

// TestLogSaysWhatIsEnforced starts a Watcher over an invalid document and
// checks that its log says what it enforces instead, and nothing else:
// with no valid version known it never claims the rule is held.
func TestLogSaysWhatIsEnforced(t *testing.T) {
	for _, tc := range []struct {
		name, shadow   string
		want, wantNone string
	}{
		{"shadow valid", "", "held at its last valid version, its shadow", "not enforced"},
		{"shadow corrupt", "garbage", "no valid version known: the rule is not enforced", "held at its last valid version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			etcd := etcdtest.Start(t)
			cli := etcd.Client(t)
			ctx := context.Background()
			var l etcdlayout.Layout
			putRule(t, cli, l, rule.Rule{Domain: "api", ID: "login", Limit: 5, WindowSeconds: 60})
			ops := []clientv3.Op{clientv3.OpPut(l.Rule("api", "login"), "junk")}
			if tc.shadow != "" {
				ops = append(ops, clientv3.OpPut(l.ValidRule("api", "login"), tc.shadow))
			}
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				t.Fatal(err)
			}
			logs := &syncbuf.Buffer{}
			w, err := New(Config{Client: cli, Apply: (&recorder{}).apply, Logger: slog.New(slog.NewTextHandler(logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			rctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- w.Run(rctx) }()
			defer func() { stop(); <-done }()
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := w.WaitSynced(sctx); err != nil {
				t.Fatal(err)
			}
			got := logs.String()
			if !strings.Contains(got, tc.want) || strings.Contains(got, tc.wantNone) {
				t.Errorf("log:\n%s\nwant a line with %q and none with %q", got, tc.want, tc.wantNone)
			}
		})
	}
}

// TestInvalidUTF8DocumentIsHeld writes a rule document whose description
// holds bytes that are not UTF-8: decoding would read them as U+FFFD and
// accept another rule than the one written. It is an invalid document
// like any other — the running Watcher, and one started afterwards, hold
// the last valid version and say where the bad byte is.
func TestInvalidUTF8DocumentIsHeld(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	var l etcdlayout.Layout
	putRule(t, cli, l, rule.Rule{Domain: "api", ID: "login", Limit: 5, WindowSeconds: 60})
	w, rec := startWatcher(t, cli, false)

	doc := "{\"rule_id\":\"login\",\"limit\":6,\"window_seconds\":60,\"description\":\"x\xff\xfe\"}"
	if _, err := cli.Put(context.Background(), l.Rule("api", "login"), doc); err != nil {
		t.Fatal(err)
	}
	const reason = "line 1, column 66: not valid UTF-8 at byte offset 65"
	for _, name := range []string{"running", "started afterwards"} {
		t.Run(name, func(t *testing.T) {
			w, rec := w, rec
			if name == "started afterwards" {
				w, rec = startWatcher(t, cli, false)
			}
			wait.For(t, 10*time.Second, "the rule held", func() bool { return w.Stats().Held == 1 })
			if held := w.Held(); len(held) != 1 || !held[0].Kept || held[0].Version.Limit != 5 || !strings.Contains(held[0].Reason, reason) {
				t.Errorf("Held() = %+v, want api/login kept at limit 5, the reason saying %q", held, reason)
			}
			if got := rec.limits()["api/login"]; got != 5 {
				t.Errorf("limit in force %d, want the last valid version's 5", got)
			}
		})
	}
}
