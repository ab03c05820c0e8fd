package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/testkit/leakcheck"
)

// logRecorder is a slog.Handler that keeps every record, for tests that
// check what a coordinator logged.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}

// find returns the attributes of the records of message msg, in order.
func (l *logRecorder) find(msg string) []map[string]slog.Value {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]slog.Value
	for _, r := range l.records {
		if r.Message != msg {
			continue
		}
		attrs := map[string]slog.Value{"level": slog.StringValue(r.Level.String())}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value; return true })
		out = append(out, attrs)
	}
	return out
}

// candidacies returns each campaigning coordinator's lease, by name, read
// from the election keys.
func (h *harness) candidacies(ctx context.Context) map[string]clientv3.LeaseID {
	h.t.Helper()
	resp, err := h.cli.Get(ctx, h.layout.Election(), clientv3.WithPrefix())
	if err != nil {
		h.t.Fatalf("list election keys: %v", err)
	}
	out := map[string]clientv3.LeaseID{}
	for _, kv := range resp.Kvs {
		var cand candidate
		if err := json.Unmarshal(kv.Value, &cand); err != nil {
			h.t.Fatalf("election key %s: %v", kv.Key, err)
		}
		out[cand.Name] = clientv3.LeaseID(kv.Lease)
	}
	return out
}

// TestCandidacySurvivesSessionLoss revokes a coordinator's election lease
// — what etcd does when its keepalives are starved past the TTL — and
// checks that the coordinator notices within about the TTL, logs it, and
// campaigns again under a new lease, so that the election lists it again.
// A standby used to go on waiting for the leader's key with no key of its
// own, until the leader left.
func TestCandidacySurvivesSessionLoss(t *testing.T) {
	for _, tc := range []struct {
		name    string
		victim  string // whose lease is revoked: c1 leads, c2 stands by
		leading bool
	}{
		{name: "standby", victim: "c2", leading: false},
		{name: "leader", victim: "c1", leading: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			logs := map[string]*logRecorder{"c1": {}, "c2": {}}
			start := func(name string) *running {
				return h.startWith(name, func(cfg *Config) { cfg.Logger = slog.New(logs[name]) })
			}
			c1 := start("c1")
			waitFor(t, 5*time.Second, "c1 leads", c1.c.Leader)
			c2 := start("c2")
			byName := map[string]*running{"c1": c1, "c2": c2}
			waitFor(t, 5*time.Second, "both campaign", func() bool { return len(h.candidacies(ctx)) == 2 })
			lease := h.candidacies(ctx)[tc.victim]

			if _, err := h.cli.Revoke(ctx, lease); err != nil {
				t.Fatalf("revoke %s's lease %x: %v", tc.victim, lease, err)
			}
			// The TTL is 1 s: noticed at once (revoked) or within it
			// (expired), then a backoff of at most 2 s.
			waitFor(t, 4*time.Second, tc.victim+" campaigns again under a new lease", func() bool {
				l, ok := h.candidacies(ctx)[tc.victim]
				return ok && l != lease
			})
			if got := len(h.candidacies(ctx)); got != 2 {
				t.Fatalf("got %d candidates, want 2", got)
			}
			cands, err := c1.c.Candidates(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(cands) != 2 || !cands[0].Leader {
				t.Fatalf("got candidates %+v, want 2, the first leading", cands)
			}
			waitFor(t, 5*time.Second, "one of them leads", func() bool { return c1.c.Leader() || c2.c.Leader() })
			if got := byName[tc.victim].c.stats.sessionsLost.Load(); got != 1 {
				t.Fatalf("got %d sessions lost, want 1", got)
			}
			lost := logs[tc.victim].find("etcd session lost; campaigning again with a new session")
			if len(lost) != 1 {
				t.Fatalf("got %d session-lost log lines, want 1", len(lost))
			}
			if got, want := lost[0]["lease"].String(), leaseHex(lease); got != want {
				t.Errorf("logged lease %s, want %s", got, want)
			}
			if got, want := lost[0]["reason"].String(), "lease expired or revoked in etcd"; got != want {
				t.Errorf("logged reason %q, want %q", got, want)
			}
			if got := lost[0]["leading"].Bool(); got != tc.leading {
				t.Errorf("logged leading=%v, want %v", got, tc.leading)
			}
			if got := lost[0]["level"].String(); got != "WARN" {
				t.Errorf("logged at %s, want WARN", got)
			}
		})
	}
}

// leaseHex is a lease's ID as the election key and the log spell it.
func leaseHex(id clientv3.LeaseID) string { return fmt.Sprintf("%x", int64(id)) }

// TestEtcdUnreachableBacksOff stops etcd under a leader and a standby:
// the leader steps down
// within its TTL, fails to create a session while etcd is away — backing
// off and logging once, not once per attempt — leads again once etcd is
// back, and stops without leaving a goroutine behind.
func TestEtcdUnreachableBacksOff(t *testing.T) {
	leakcheck.Check(t, "internal/control/coordinator.(*Coordinator)")
	h := newHarness(t)
	logs := &logRecorder{}
	c1 := h.startWith("c1", func(cfg *Config) { cfg.Logger = slog.New(logs) })
	waitFor(t, 5*time.Second, "c1 leads", c1.c.Leader)
	c2 := h.start("c2")
	waitFor(t, 5*time.Second, "both campaign", func() bool { return len(h.candidacies(context.Background())) == 2 })

	h.etcd.Stop()
	waitFor(t, 5*time.Second, "c1 steps down", func() bool { return !c1.c.Leader() })
	// Each attempt waits up to the TTL (1 s) for etcd, then backs off
	// up to 2 s: several attempts in 6 s, one line logged.
	time.Sleep(6 * time.Second)
	if got := len(logs.find("cannot create an etcd session; not campaigning until one is created")); got != 1 {
		t.Fatalf("got %d log lines of failed sessions, want 1 (rate-limited)", got)
	}

	h.etcd.Restart()
	waitFor(t, 10*time.Second, "one of them leads again", func() bool { return c1.c.Leader() || c2.c.Leader() })
	waitFor(t, 5*time.Second, "both campaign again", func() bool { return len(h.candidacies(context.Background())) == 2 })
	rec := logs.find("etcd session created after failures")
	if len(rec) != 1 || rec[0]["failures"].Int64() < 2 {
		t.Fatalf("got recovery log lines %v, want one with failures >= 2", rec)
	}

	// Stopping while etcd is away returns promptly.
	h.etcd.Stop()
	waitFor(t, 5*time.Second, "no leader", func() bool { return !c1.c.Leader() && !c2.c.Leader() })
	stopped := make(chan struct{})
	go func() { c1.stop(); c2.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of its context ending while etcd was away")
	}
}
