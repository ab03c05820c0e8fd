package etcdquota

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/dc/quota"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

var _ limiter.Instances = (*Agent)(nil)

const wait = 15 * time.Second // bound of every eventually

var (
	layout = etcdlayout.Layout{Prefix: "/test/"}
	dcs    = []string{"a", "b", "c"}
)

// newClock returns the tests' fake clock.
func newClock() *fakeclock.Clock { return fakeclock.New(time.Now()) }

func globalRule(id string) *ruleset.Rule {
	return &ruleset.Rule{Spec: rule.Rule{ID: id, Domain: "d", Scope: rule.ScopeGlobal, Limit: 100, WindowSeconds: 1}}
}

var static = globalRule("x").Spec.StaticShare("a", dcs) // 1/3, a little less

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	t.Cleanup(cancel)
	return ctx
}

// put writes m at key and returns the revision of the write.
func put(t *testing.T, cli *clientv3.Client, key string, m proto.Message) int64 {
	t.Helper()
	v, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return putRaw(t, cli, key, v)
}

func putRaw(t *testing.T, cli *clientv3.Client, key string, v []byte) int64 {
	t.Helper()
	resp, err := cli.Put(ctxT(t), key, string(v))
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return resp.Header.Revision
}

func putDoc(t *testing.T, cli *clientv3.Client, dc, id string, share float64, keys ...*weirv1.KeyShare) int64 {
	t.Helper()
	return put(t, cli, layout.Assignment(dc, "d", id), &weirv1.RuleAssignment{
		Dc: dc, Domain: "d", RuleId: id, Epoch: 7, Share: share, Keys: keys, IssuedMs: time.Now().UnixMilli(),
	})
}

func putLease(t *testing.T, cli *clientv3.Client, dc string, ttl time.Duration, epoch uint64) int64 {
	t.Helper()
	return put(t, cli, layout.Lease(dc), &weirv1.AssignmentLease{
		Dc: dc, Epoch: epoch, ValidUntilMs: time.Now().Add(time.Hour).UnixMilli(), TtlMs: ttl.Milliseconds(), Leader: "test",
	})
}

func remove(t *testing.T, cli *clientv3.Client, key string) int64 {
	t.Helper()
	resp, err := cli.Delete(ctxT(t), key)
	if err != nil {
		t.Fatalf("delete %s: %v", key, err)
	}
	return resp.Header.Revision
}

// eventually polls cond until it returns "" or wait passes, then fails
// with its last message.
func eventually(t *testing.T, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", wait, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func shareIs(tb *quota.Table, id, key string, want float64) func() string {
	r := globalRule(id)
	return func() string {
		if got := tb.Share("d", r, key); got != want {
			return fmt.Sprintf("Share(%s, %q): got %v, want %v", id, key, got, want)
		}
		return ""
	}
}

// instance is an Agent run by a test.
type instance struct {
	agent *Agent
	table *quota.Table
	clock *fakeclock.Clock
	stop  func() // cancels Run and waits for it, checking it returned soon
}

type options struct {
	dc, name  string
	afterList func(rev int64)
	mod       func(*Config)
}

func start(t *testing.T, c *etcdtest.Cluster, o options) *instance {
	t.Helper()
	if o.dc == "" {
		o.dc = "a"
	}
	if o.name == "" {
		o.name = "i1"
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	clk := newClock()
	tb, err := quota.New(quota.Config{DC: o.dc, DCs: dcs, Now: clk.Now, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Client:        c.Client(t),
		Table:         tb,
		Instance:      o.name,
		Layout:        layout,
		LeaseTTL:      2 * time.Second,
		CountInterval: 20 * time.Millisecond,
		MinBackoff:    10 * time.Millisecond,
		MaxBackoff:    200 * time.Millisecond,
		PageSize:      2,
		Logger:        log,
	}
	if o.mod != nil {
		o.mod(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.afterList = o.afterList
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: got %v, want nil", err)
				}
			case <-time.After(cfg.StopTimeout + 3*time.Second):
				t.Fatal("Run did not return after its context was cancelled")
			}
			checkNoGoroutines(t, a)
		})
	}
	t.Cleanup(stop)
	return &instance{agent: a, table: tb, clock: clk, stop: stop}
}

// checkNoGoroutines fails when a goroutine of the package is still
// running once Run has returned.
func checkNoGoroutines(t *testing.T, a *Agent) {
	t.Helper()
	// Other Agents may be running: look for methods of this one.
	const self = "etcdquota.(*Agent)."
	recv := fmt.Sprintf("(%p", a)
	buf := make([]byte, 4<<20)
	var stacks string
	for range 100 {
		stacks = string(buf[:runtime.Stack(buf, true)])
		found := false
		for line := range strings.Lines(stacks) {
			if strings.Contains(line, self) && strings.Contains(line, recv) {
				found = true
				break
			}
		}
		if !found {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("goroutines of Agent %p still running after Run returned:\n%s", a, stacks)
}

func waitSynced(t *testing.T, tb *quota.Table) {
	t.Helper()
	if err := tb.WaitSynced(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// readRecord reads the instance record of dc/name; nil when there is none.
func readRecord(t *testing.T, cli *clientv3.Client, dc, name string) (*weirv1.InstanceRecord, clientv3.LeaseID) {
	t.Helper()
	resp, err := cli.Get(ctxT(t), layout.Instance(dc, name))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0
	}
	var m weirv1.InstanceRecord
	if err := proto.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
		t.Fatalf("instance record: %v", err)
	}
	return &m, clientv3.LeaseID(resp.Kvs[0].Lease)
}

// ackedAtLeast waits until both the Table and the instance record
// acknowledge revision rev.
func ackedAtLeast(t *testing.T, cli *clientv3.Client, in *instance, rev int64) {
	t.Helper()
	eventually(t, func() string {
		if _, got := in.table.Applied(); got < rev {
			return fmt.Sprintf("Table.Applied: got revision %d, want ≥ %d", got, rev)
		}
		rec, _ := readRecord(t, cli, in.table.DC(), in.agent.cfg.Instance)
		if rec == nil || rec.AppliedRevision < rev {
			return fmt.Sprintf("instance record: got %v, want applied_revision ≥ %d", rec, rev)
		}
		return ""
	})
}

func TestSharesFollowEtcd(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	putLease(t, cli, "a", time.Hour, 3)
	putDoc(t, cli, "a", "r1", 0.8)
	putDoc(t, cli, "b", "r1", 0.1) // another DC's: not ours
	for i := range 5 {             // more than a page
		putDoc(t, cli, "a", fmt.Sprintf("p%d", i), 0.05*float64(i))
	}
	in := start(t, c, options{})
	waitSynced(t, in.table)
	for _, check := range []func() string{
		shareIs(in.table, "r1", "", 0.8),
		shareIs(in.table, "p4", "", 0.2),
		shareIs(in.table, "none", "", static),
	} {
		if msg := check(); msg != "" {
			t.Fatalf("right after the first sync: %s", msg)
		}
	}
	if e, _ := in.table.Applied(); e != 7 {
		t.Errorf("epoch after the listing: got %d, want 7", e)
	}

	rev := putDoc(t, cli, "a", "r2", 0.9, &weirv1.KeyShare{Key: "hot", Share: 0.95})
	eventually(t, shareIs(in.table, "r2", "hot", 0.95))
	eventually(t, shareIs(in.table, "r2", "cold", 0.9))
	ackedAtLeast(t, cli, in, rev)

	putDoc(t, cli, "a", "r1", 0.3)
	eventually(t, shareIs(in.table, "r1", "", 0.3))

	// A deleted document: min(static, last assigned).
	rev = remove(t, cli, layout.Assignment("a", "d", "r2"))
	eventually(t, shareIs(in.table, "r2", "hot", static))
	eventually(t, shareIs(in.table, "r2", "cold", static))
	ackedAtLeast(t, cli, in, rev)

	// Another DC's documents do not move the acknowledgement, but a
	// progress notification may; the record never runs ahead of the Table.
	if st := in.agent.Stats(); st.Lists != 1 || st.Compactions != 0 || st.BadKeys != 0 {
		t.Errorf("Stats: got %+v, want 1 listing, no compaction, no bad key", st)
	}
}

func TestLeaseExpiryFallsBack(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	in := start(t, c, options{})
	waitSynced(t, in.table)
	putDoc(t, cli, "a", "r", 0.8)
	eventually(t, shareIs(in.table, "r", "", static)) // no lease yet
	putLease(t, cli, "a", 2*time.Second, 4)
	eventually(t, shareIs(in.table, "r", "", 0.8))

	in.clock.Advance(2 * time.Second) // nothing heard for the TTL
	if msg := shareIs(in.table, "r", "", static)(); msg != "" {
		t.Fatalf("after the lease's TTL: %s", msg)
	}
	putLease(t, cli, "a", 2*time.Second, 5) // renewed
	eventually(t, shareIs(in.table, "r", "", 0.8))

	// A lease whose valid_until has passed on the coordinator's clock is
	// not in force, whatever its TTL.
	put(t, cli, layout.Lease("a"), &weirv1.AssignmentLease{Dc: "a", Epoch: 6, ValidUntilMs: time.Now().Add(-time.Second).UnixMilli(), TtlMs: 60_000})
	eventually(t, shareIs(in.table, "r", "", static))

	putLease(t, cli, "a", time.Minute, 7)
	eventually(t, shareIs(in.table, "r", "", 0.8))
	remove(t, cli, layout.Lease("a"))
	eventually(t, shareIs(in.table, "r", "", static))
}

func TestCompactionForcesRelist(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	putLease(t, cli, "a", time.Hour, 1)
	putDoc(t, cli, "a", "gone", 0.8)
	putDoc(t, cli, "a", "changed", 0.1)
	var hooked atomic.Bool
	var last atomic.Int64
	in := start(t, c, options{afterList: func(rev int64) {
		if !hooked.CompareAndSwap(false, true) {
			return
		}
		// Between the listing and the watch: changes the watch would see,
		// then a compaction that makes it start too late to see them. (No
		// t.Fatal here: this runs in the Agent's goroutine.)
		ctx := context.Background()
		doc := func(id string, share float64) clientv3.Op {
			v, _ := proto.Marshal(&weirv1.RuleAssignment{Dc: "a", Domain: "d", RuleId: id, Share: share})
			return clientv3.OpPut(layout.Assignment("a", "d", id), string(v))
		}
		for _, op := range []clientv3.Op{
			clientv3.OpDelete(layout.Assignment("a", "d", "gone")),
			doc("changed", 0.6), doc("new", 0.7), doc("new2", 0.2),
		} {
			resp, err := cli.Do(ctx, op)
			if err != nil {
				t.Errorf("%v: %v", op, err)
				return
			}
			last.Store(max(last.Load(), opRevision(resp)))
		}
		if _, err := cli.Compact(ctx, last.Load()); err != nil {
			t.Errorf("compact: %v", err)
		}
	}})
	eventually(t, func() string {
		if st := in.agent.Stats(); st.Compactions < 1 || st.Lists < 2 {
			return fmt.Sprintf("Stats: got %+v, want a compaction and a re-list", st)
		}
		return ""
	})
	eventually(t, shareIs(in.table, "changed", "", 0.6))
	eventually(t, shareIs(in.table, "new", "", 0.7))
	eventually(t, shareIs(in.table, "new2", "", 0.2))
	eventually(t, shareIs(in.table, "gone", "", static)) // deleted while not watching
	ackedAtLeast(t, cli, in, last.Load())

	// And the watch after the re-list works.
	putDoc(t, cli, "a", "after", 0.4)
	eventually(t, shareIs(in.table, "after", "", 0.4))
}

// opRevision is the revision of a put's or delete's response.
func opRevision(r clientv3.OpResponse) int64 {
	if p := r.Put(); p != nil {
		return p.Header.Revision
	}
	return r.Del().Header.Revision
}

func TestCorruptDocumentsAreSkipped(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	putLease(t, cli, "a", time.Hour, 1)
	putDoc(t, cli, "a", "r", 0.2)
	putDoc(t, cli, "a", "big", 0.9)
	in := start(t, c, options{})
	waitSynced(t, in.table)
	good := putDoc(t, cli, "a", "ok", 0.5)
	ackedAtLeast(t, cli, in, good)

	doc := func(dc, domain, id string, share float64, keys ...*weirv1.KeyShare) []byte {
		v, err := proto.Marshal(&weirv1.RuleAssignment{Dc: dc, Domain: domain, RuleId: id, Share: share, Keys: keys})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	huge := bytes.Repeat([]byte{0}, quota.MaxDocumentSize+1)
	ks := func(k string) *weirv1.KeyShare { return &weirv1.KeyShare{Key: k, Share: 0.5} }
	tests := []struct {
		name, id string
		value    []byte
		want     float64 // the rule's share after the corrupt document
	}{
		{"undecodable after a share below static", "r", []byte("\xff\xff\xff garbage"), 0.2},
		{"oversized after a share above static", "big", huge, static},
		{"undecodable without a previous share", "fresh", []byte{0x0a, 0x05, 'a'}, 0},
		{"other DC in the document", "dc", doc("b", "d", "dc", 0.5), 0},
		{"other domain in the document", "dom", doc("a", "e", "dom", 0.5), 0},
		{"other rule in the document", "rid", doc("a", "d", "x", 0.5), 0},
		{"share NaN", "nan", doc("a", "d", "nan", math.NaN()), 0},
		{"share above 1", "above", doc("a", "d", "above", 1.5), 0},
		{"share below 0", "below", doc("a", "d", "below", -0.5), 0},
		{"duplicate keys", "dup", doc("a", "d", "dup", 0.5, ks("k"), ks("k")), 0},
		{"key too long", "long", doc("a", "d", "long", 0.5, ks(strings.Repeat("k", quota.MaxKeyLen+1))), 0},
	}
	var first int64
	for i, tt := range tests {
		rev := putRaw(t, cli, layout.Assignment("a", "d", tt.id), tt.value)
		if i == 0 {
			first = rev
		}
		eventually(t, func() string {
			if got := in.table.Stats().Corrupt; got != uint64(i+1) {
				return fmt.Sprintf("%s: Stats.Corrupt: got %d, want %d", tt.name, got, i+1)
			}
			return ""
		})
		if msg := shareIs(in.table, tt.id, "", tt.want)(); msg != "" {
			t.Errorf("%s: %s (%+v)", tt.name, msg, in.table.Stats())
		}
	}
	// The acknowledgement stays below the first corrupt document while it
	// is the latest of its rule, whatever else is applied.
	other := putDoc(t, cli, "a", "ok", 0.4)
	eventually(t, shareIs(in.table, "ok", "", 0.4))
	if _, got := in.table.Applied(); got != first-1 {
		t.Errorf("Applied while corrupt documents are in the way: got %d, want %d", got, first-1)
	}
	if rec, _ := readRecord(t, cli, "a", "i1"); rec == nil || rec.AppliedRevision >= first {
		t.Errorf("instance record: got %v, want applied_revision < %d", rec, first)
	}
	// Valid documents, or deletions, clear the way.
	for _, tt := range tests {
		if tt.id == "r" {
			putDoc(t, cli, "a", "r", 0.25)
			continue
		}
		remove(t, cli, layout.Assignment("a", "d", tt.id))
	}
	last := putDoc(t, cli, "a", "ok", 0.45)
	ackedAtLeast(t, cli, in, last)
	if last <= other {
		t.Fatalf("revisions: %d after %d", last, other)
	}
	eventually(t, shareIs(in.table, "r", "", 0.25))

	// A key that names no rule is skipped and counted.
	putRaw(t, cli, layout.DCQuotas("a")+"d", []byte("x"))
	eventually(t, func() string {
		if st := in.agent.Stats(); st.BadKeys != 1 {
			return fmt.Sprintf("Stats.BadKeys: got %d, want 1", st.BadKeys)
		}
		return ""
	})
}

func TestRegistration(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	before := time.Now()
	i1 := start(t, c, options{name: "i1"})
	i2 := start(t, c, options{name: "i2"})
	start(t, c, options{name: "i3", dc: "b"})
	for _, in := range []*instance{i1, i2} {
		eventually(t, func() string {
			if got := in.agent.Live(); got != 2 {
				return fmt.Sprintf("%s: Live: got %d, want 2", in.agent.cfg.Instance, got)
			}
			return ""
		})
	}
	rec, lease := readRecord(t, cli, "a", "i2")
	switch {
	case rec == nil:
		t.Fatal("no record of i2")
	case rec.Dc != "a" || rec.Instance != "i2" || rec.StartedMs < before.UnixMilli()-1 || rec.StartedMs > time.Now().UnixMilli():
		t.Errorf("record: got %v, want dc a, instance i2, started since %d", rec, before.UnixMilli())
	case lease == 0:
		t.Error("record not under a lease")
	}
	ttl, err := cli.TimeToLive(ctxT(t), lease)
	if err != nil || ttl.GrantedTTL != 2 {
		t.Errorf("lease: got %+v, %v; want granted TTL 2", ttl, err)
	}

	i2.stop()
	if rec, _ := readRecord(t, cli, "a", "i2"); rec != nil {
		t.Errorf("record of i2 after Run returned: got %v, want none (lease revoked)", rec)
	}
	eventually(t, func() string {
		if got := i1.agent.Live(); got != 1 {
			return fmt.Sprintf("i1: Live after i2 stopped: got %d, want 1", got)
		}
		return ""
	})
	if err := i2.agent.Run(context.Background()); !errors.Is(err, ErrRunning) {
		t.Errorf("second Run: got %v, want ErrRunning", err)
	}
}

func TestRegistersAgainWhenTheLeaseIsLost(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	in := start(t, c, options{})
	waitSynced(t, in.table)
	rev := putDoc(t, cli, "a", "r", 0.5)
	ackedAtLeast(t, cli, in, rev)
	_, lease := readRecord(t, cli, "a", "i1")
	if _, err := cli.Revoke(ctxT(t), lease); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string {
		rec, l := readRecord(t, cli, "a", "i1")
		if rec == nil || l == lease || rec.AppliedRevision < rev {
			return fmt.Sprintf("record: got %v under lease %x, want one under a new lease with applied_revision ≥ %d", rec, l, rev)
		}
		// The agent counts a registration once etcd has answered its put,
		// which may be after the record is visible here.
		if st := in.agent.Stats(); st.LeasesLost != 1 || st.Registrations != 2 || !st.Registered {
			return fmt.Sprintf("Stats: got %+v, want 1 lease lost and 2 registrations", st)
		}
		return ""
	})
}

func TestEtcdRestart(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	putLease(t, cli, "a", time.Hour, 1)
	putDoc(t, cli, "a", "r", 0.8)
	in := start(t, c, options{})
	waitSynced(t, in.table)

	c.Stop() // takes a few seconds: etcd waits for the open streams
	time.Sleep(500 * time.Millisecond)
	if msg := shareIs(in.table, "r", "", 0.8)(); msg != "" {
		t.Fatalf("etcd down, lease in force: %s", msg)
	}
	c.Restart()
	rev := putDoc(t, cli, "a", "r", 0.6)
	eventually(t, shareIs(in.table, "r", "", 0.6))
	ackedAtLeast(t, cli, in, rev)
	eventually(t, func() string {
		if st := in.agent.Stats(); !st.Registered {
			return fmt.Sprintf("Stats: got %+v, want registered", st)
		}
		return ""
	})
}

func TestStartsWhileEtcdIsDown(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	putLease(t, cli, "a", time.Hour, 1)
	putDoc(t, cli, "a", "r", 0.8)
	c.Stop()
	in := start(t, c, options{mod: func(cfg *Config) { cfg.RequestTimeout = 200 * time.Millisecond }})
	eventually(t, func() string {
		if st := in.agent.Stats(); st.RegisterErrors < 2 {
			return fmt.Sprintf("Stats.RegisterErrors: got %d, want at least 2 attempts", st.RegisterErrors)
		}
		return ""
	})
	if in.table.Synced() {
		t.Fatal("synced while etcd is down")
	}
	if msg := shareIs(in.table, "r", "", static)(); msg != "" {
		t.Fatalf("before the first sync: %s", msg)
	}
	c.Restart()
	waitSynced(t, in.table)
	eventually(t, shareIs(in.table, "r", "", 0.8))
	eventually(t, func() string {
		if rec, _ := readRecord(t, cli, "a", "i1"); rec == nil || rec.AppliedRevision == 0 {
			return fmt.Sprintf("record: got %v, want one with the listing acknowledged", rec)
		}
		return ""
	})
}

// TestRegistersBeforeListing checks the order the coordinator relies on:
// when the listing is made, the record is already there, saying 0.
func TestRegistersBeforeListing(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	putDoc(t, cli, "a", "r", 0.8)
	seen := make(chan *weirv1.InstanceRecord, 1)
	start(t, c, options{afterList: func(int64) {
		var rec *weirv1.InstanceRecord
		if resp, err := cli.Get(context.Background(), layout.Instance("a", "i1")); err != nil {
			t.Errorf("get the record: %v", err)
		} else if len(resp.Kvs) == 1 {
			rec = &weirv1.InstanceRecord{}
			if err := proto.Unmarshal(resp.Kvs[0].Value, rec); err != nil {
				t.Errorf("record: %v", err)
			}
		}
		select {
		case seen <- rec:
		default:
		}
	}})
	select {
	case rec := <-seen:
		// The acknowledgement of the listing may already have been
		// written; what matters is that the record existed.
		if rec == nil {
			t.Fatal("no instance record when the listing was applied")
		}
	case <-time.After(wait):
		t.Fatal("no listing")
	}
}

func TestConfigValidate(t *testing.T) {
	tb, err := quota.New(quota.Config{DC: "a", DCs: dcs})
	if err != nil {
		t.Fatal(err)
	}
	cli := &clientv3.Client{}
	ok := Config{Client: cli, Table: tb, Instance: "i"}
	tests := []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"ok", func(*Config) {}, true},
		{"no client", func(c *Config) { c.Client = nil }, false},
		{"no table", func(c *Config) { c.Table = nil }, false},
		{"no instance", func(c *Config) { c.Instance = "" }, false},
		{"instance with slash", func(c *Config) { c.Instance = "a/b" }, false},
		{"instance too long", func(c *Config) { c.Instance = strings.Repeat("i", MaxInstanceLen+1) }, false},
		{"negative TTL", func(c *Config) { c.LeaseTTL = -time.Second }, false},
		{"backoff bounds reversed", func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Second, time.Millisecond }, false},
		{"negative page size", func(c *Config) { c.PageSize = -1 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			if err := cfg.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate: got %v, want ok %v", err, tt.ok)
			}
		})
	}
}
