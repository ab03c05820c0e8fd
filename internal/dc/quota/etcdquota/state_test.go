package etcdquota

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/platform/statefile"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

func withState(path string) func(*Config) {
	return func(cfg *Config) {
		cfg.StateFile = path
		cfg.RequestTimeout = 200 * time.Millisecond
	}
}

func readState(t *testing.T, path string) *weirv1.QuotaState {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st weirv1.QuotaState
	if err := proto.Unmarshal(data, &st); err != nil {
		t.Fatalf("state file: %v", err)
	}
	return &st
}

// TestStateFileSurvivesRestart: an instance restarted while etcd is down
// enforces min(static, what it had applied), not its static share, until
// it lists again.
func TestStateFileSurvivesRestart(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	path := filepath.Join(t.TempDir(), "quota-a.pb")
	putLease(t, cli, "a", time.Hour, 1)
	putDoc(t, cli, "a", "low", 0.1, &weirv1.KeyShare{Key: "k", Share: 0.02})
	rev := putDoc(t, cli, "a", "high", 0.8)

	first := start(t, c, options{mod: withState(path)})
	ackedAtLeast(t, cli, first, rev)
	// What is acknowledged has been saved first.
	rec, _ := readRecord(t, cli, "a", "i1")
	if st := readState(t, path); st.GetRevision() < rec.GetAppliedRevision() || len(st.GetAssignments()) != 2 {
		t.Fatalf("state file at revision %d with %d assignments; the record acknowledges %d: want the state saved up to it, both rules",
			st.GetRevision(), len(st.GetAssignments()), rec.GetAppliedRevision())
	}
	if st := first.agent.Stats(); st.StateSaves == 0 || st.StateSaveErrors != 0 || st.Restored != -1 {
		t.Errorf("first instance Stats: %+v; want saves, no error, nothing restored", st)
	}
	first.stop()
	c.Stop()

	second := start(t, c, options{name: "i2", mod: withState(path)})
	if st := second.agent.Stats(); st.Restored != 2 {
		t.Errorf("Stats.Restored: got %d, want 2", st.Restored)
	}
	for _, want := range []struct {
		id, key string
		share   float64
	}{{"low", "", 0.1}, {"low", "k", 0.02}, {"high", "", static}, {"unknown", "", static}} {
		if msg := shareIs(second.table, want.id, want.key, want.share)(); msg != "" {
			t.Errorf("restarted with etcd down: %s", msg)
		}
	}
	if second.table.Synced() {
		t.Error("synced from a saved state; want the first listing to sync")
	}
	c.Restart()
	putDoc(t, cli, "a", "low", 0.3)
	waitSynced(t, second.table)
	eventually(t, shareIs(second.table, "low", "k", 0.3))
	eventually(t, shareIs(second.table, "high", "", 0.8))
}

// TestBadStateFile: a state file that cannot be used is logged and
// ignored — static shares until the first listing, as without one — and
// the instance works on.
func TestBadStateFile(t *testing.T) {
	other, err := proto.Marshal(&weirv1.QuotaState{Dc: "b", Revision: 3, Assignments: []*weirv1.RuleAssignment{{Dc: "b", Domain: "d", RuleId: "low", Share: 0.1}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		write func(path string) error
	}{
		{"garbage", func(p string) error { return os.WriteFile(p, []byte("\xff\xff\xff not a protobuf"), 0o600) }},
		{"another DC's", func(p string) error { return os.WriteFile(p, other, 0o600) }},
		{"too large", func(p string) error {
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				return err
			}
			return os.Truncate(p, statefile.MaxSize+1) // sparse: nothing is read
		}},
		{"a directory", func(p string) error { return os.Mkdir(p, 0o700) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := etcdtest.Start(t)
			cli := c.Client(t)
			putLease(t, cli, "a", time.Hour, 1)
			rev := putDoc(t, cli, "a", "low", 0.1)
			path := filepath.Join(t.TempDir(), "quota-a.pb")
			if err := tc.write(path); err != nil {
				t.Fatal(err)
			}
			c.Stop()
			in := start(t, c, options{mod: withState(path)})
			if st := in.agent.Stats(); st.Restored != -1 {
				t.Errorf("Stats.Restored: got %d, want -1", st.Restored)
			}
			if msg := shareIs(in.table, "low", "", static)(); msg != "" {
				t.Errorf("with a bad state file: %s", msg)
			}
			c.Restart()
			waitSynced(t, in.table)
			eventually(t, shareIs(in.table, "low", "", 0.1))
			if tc.name != "a directory" {
				ackedAtLeast(t, cli, in, rev)
			}
		})
	}
}

// TestStateSaveFailure: when the state cannot be saved the old file is
// removed and the acknowledgement goes on; when it cannot be removed
// either, the acknowledgement waits — a restart could otherwise restore
// limits older than the ones acknowledged.
func TestStateSaveFailure(t *testing.T) {
	t.Run("removed", func(t *testing.T) {
		c := etcdtest.Start(t)
		cli := c.Client(t)
		rev := putDoc(t, cli, "a", "low", 0.1)
		path := filepath.Join(t.TempDir(), "missing-dir", "quota-a.pb")
		in := start(t, c, options{mod: withState(path)})
		ackedAtLeast(t, cli, in, rev)
		if st := in.agent.Stats(); st.StateSaveErrors == 0 || st.StateSaves != 0 {
			t.Errorf("Stats: %+v; want failed saves only", st)
		}
	})
	t.Run("old file removed", func(t *testing.T) {
		c := etcdtest.Start(t)
		cli := c.Client(t)
		rev := putDoc(t, cli, "a", "low", 0.1)
		// A name of 250 bytes exists; the temporary file a save writes
		// beside it (".name.random") is longer than a file name may be,
		// so every save fails while the old file can be removed.
		path := filepath.Join(t.TempDir(), strings.Repeat("q", 250))
		old, err := proto.Marshal(&weirv1.QuotaState{Dc: "a", Revision: 1, Assignments: []*weirv1.RuleAssignment{{Dc: "a", Domain: "d", RuleId: "low", Share: 0.9}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, old, 0o600); err != nil {
			t.Fatal(err)
		}
		in := start(t, c, options{mod: withState(path)})
		ackedAtLeast(t, cli, in, rev)
		if st := in.agent.Stats(); st.StateSaveErrors == 0 || st.StateSaves != 0 || st.Restored != 1 {
			t.Errorf("Stats: %+v; want the old state restored, then failed saves only", st)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("old state file after a failed save: %v, want it removed", err)
		}
	})
	t.Run("kept", func(t *testing.T) {
		c := etcdtest.Start(t)
		cli := c.Client(t)
		putDoc(t, cli, "a", "low", 0.1)
		path := filepath.Join(t.TempDir(), "quota-a.pb")
		// A non-empty directory: neither replaced by a rename nor removed.
		if err := os.MkdirAll(filepath.Join(path, "x"), 0o700); err != nil {
			t.Fatal(err)
		}
		in := start(t, c, options{mod: withState(path)})
		waitSynced(t, in.table)
		eventually(t, func() string {
			if st := in.agent.Stats(); st.StateSaveErrors == 0 {
				return "no failed save yet"
			}
			return ""
		})
		// Registered with 0 before the listing; nothing since.
		time.Sleep(300 * time.Millisecond)
		if rec, _ := readRecord(t, cli, "a", "i1"); rec == nil || rec.GetAppliedRevision() != 0 {
			t.Fatalf("instance record %v; want it registered and acknowledging nothing", rec)
		}
		if err := os.RemoveAll(path); err != nil {
			t.Fatal(err)
		}
		rev := putDoc(t, cli, "a", "low", 0.2) // the next change saves
		ackedAtLeast(t, cli, in, rev)
		if st := readState(t, path); st.GetRevision() < rev {
			t.Errorf("state saved at revision %d, want ≥ %d", st.GetRevision(), rev)
		}
	})
}
