package listwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/testkit/etcdtest"
)

const (
	prefix = "/lw/"
	wait   = 15 * time.Second // bound of every wait
)

// recorder is a Handler that keeps the state the Loop hands it and every
// event applied. onReplace, if set, runs inside Replace, between a listing
// and the watch that follows it.
type recorder struct {
	mu       sync.Mutex
	state    map[string]string
	listed   map[string]string // what the first listing gave
	replaces []int64           // the listings' revisions
	bad      []string          // calls out of order
	applied  []string
	revs     []int64 // the revisions of the events applied, in order
	last     int64   // rev of the last call

	onReplace func(n int, rev int64)
}

func (r *recorder) Replace(rev int64, kvs []Event) {
	r.mu.Lock()
	r.state = map[string]string{}
	for _, kv := range kvs {
		r.state[string(kv.Key)] = string(kv.Value)
	}
	if r.listed == nil {
		r.listed = maps.Clone(r.state)
	}
	r.replaces = append(r.replaces, rev)
	r.last = rev
	n := len(r.replaces)
	r.mu.Unlock()
	if r.onReplace != nil {
		r.onReplace(n, rev)
	}
}

func (r *recorder) Apply(rev int64, events []Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rev <= r.last {
		r.bad = append(r.bad, fmt.Sprintf("Apply at revision %d after %d", rev, r.last))
	}
	r.last = rev
	for _, ev := range events {
		if ev.Delete {
			delete(r.state, string(ev.Key))
			r.applied = append(r.applied, "del "+string(ev.Key))
		} else {
			r.state[string(ev.Key)] = string(ev.Value)
			r.applied = append(r.applied, "put "+string(ev.Key)+"="+string(ev.Value))
		}
		r.revs = append(r.revs, ev.Revision)
	}
}

func (r *recorder) snapshot() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.state)
}

// run starts a Loop over prefix into h. Its stop, also called when the
// test ends, cancels Run and checks that Run returns soon, with nil, and
// leaves no goroutine.
func run(t *testing.T, cli *clientv3.Client, h Handler, edit func(*Loop)) (*Loop, func()) {
	t.Helper()
	l, err := New(Config{
		Client: cli, Prefix: prefix, Handler: h, PageSize: 4,
		RequestTimeout: time.Second, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(l)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: got %v, want nil", err)
				}
			case <-time.After(wait):
				t.Fatal("Run did not return after its context was cancelled")
			}
			checkNoGoroutines(t, l)
		})
	}
	t.Cleanup(stop)
	return l, stop
}

// checkNoGoroutines fails when a method of l is still on a stack.
func checkNoGoroutines(t *testing.T, l *Loop) {
	t.Helper()
	recv := fmt.Sprintf("(%p", l)
	buf := make([]byte, 4<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for line := range strings.Lines(stacks) {
		if strings.Contains(line, "listwatch.(*Loop).") && strings.Contains(line, recv) {
			t.Errorf("a goroutine of Loop %p still runs after Run returned:\n%s", l, stacks)
			return
		}
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	t.Cleanup(cancel)
	return ctx
}

func waitRev(t *testing.T, l *Loop, rev int64) {
	t.Helper()
	if err := l.Wait(ctxT(t), rev); err != nil {
		t.Fatal(err)
	}
}

// do runs ops one by one and returns the revision of the last.
func do(ctx context.Context, cli *clientv3.Client, ops ...clientv3.Op) (int64, error) {
	var rev int64
	for _, op := range ops {
		resp, err := cli.Do(ctx, op)
		if err != nil {
			return 0, fmt.Errorf("%v: %w", op, err)
		}
		if p := resp.Put(); p != nil {
			rev = p.Header.Revision
		} else {
			rev = resp.Del().Header.Revision
		}
	}
	return rev, nil
}

func mustDo(t *testing.T, cli *clientv3.Client, ops ...clientv3.Op) int64 {
	t.Helper()
	rev, err := do(ctxT(t), cli, ops...)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

func checkState(t *testing.T, r *recorder, want map[string]string) {
	t.Helper()
	if got := r.snapshot(); !maps.Equal(got, want) {
		t.Errorf("state: got %v, want %v", got, want)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Errorf("handler called out of order: %q", r.bad)
	}
}

// pagedKV lets a test write between the pages of a listing.
type pagedKV struct {
	clientv3.KV
	mu        sync.Mutex
	gets      int
	afterPage func(n int)
}

func (k *pagedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := k.KV.Get(ctx, key, opts...)
	k.mu.Lock()
	k.gets++
	n := k.gets
	k.mu.Unlock()
	if err == nil && k.afterPage != nil {
		k.afterPage(n)
	}
	return resp, err
}

// A listing of more keys than a page reads every key under the prefix, and
// only those, as of one revision: what is written between two pages comes
// by the watch, once.
func TestListsInPagesAtOneRevision(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 5, 8, 13} { // PageSize 4
		t.Run(fmt.Sprint(n, " keys"), func(t *testing.T) {
			c := etcdtest.Start(t)
			cli := c.Client(t)
			want := map[string]string{}
			ops := []clientv3.Op{clientv3.OpPut("/lv", "before"), clientv3.OpPut("/lw", "no slash"), clientv3.OpPut("/lx/", "after")}
			for i := range n {
				k, v := fmt.Sprintf("%sk%02d", prefix, i), fmt.Sprint("v", i)
				want[k] = v
				ops = append(ops, clientv3.OpPut(k, v))
			}
			listed := mustDo(t, cli, ops...)
			kv := &pagedKV{KV: cli.KV}
			written := make(chan int64, 1)
			kv.afterPage = func(page int) {
				if page != 1 {
					return
				}
				// Changes a page not yet read, and adds a key.
				rev, err := do(context.Background(), cli,
					clientv3.OpPut(prefix+"k12", "changed"), clientv3.OpPut(prefix+"zz", "new"), clientv3.OpDelete(prefix+"k03"))
				if err != nil {
					t.Error(err)
				}
				written <- rev
			}
			r := &recorder{}
			l, _ := run(t, cli, r, func(l *Loop) { l.kv = kv })
			later := <-written
			waitRev(t, l, later)
			r.mu.Lock()
			if !maps.Equal(r.listed, want) {
				t.Errorf("listing: got %v, want %v", r.listed, want)
			}
			if got := r.replaces; len(got) != 1 || got[0] != listed {
				t.Errorf("listings: got revisions %v, want [%d]", got, listed)
			}
			r.mu.Unlock()
			want[prefix+"zz"] = "new"
			want[prefix+"k12"] = "changed"
			delete(want, prefix+"k03")
			checkState(t, r, want)
			if st := l.Stats(); st.Lists != 1 || st.Watches != 1 || st.Revision != later {
				t.Errorf("Stats: got %+v, want 1 listing, 1 watch, revision %d", st, later)
			}
		})
	}
}

// What is written right after the listing, before the watch starts, is
// applied exactly once, in order.
func TestWatchFromTheListingsNextRevision(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	mustDo(t, cli, clientv3.OpPut(prefix+"a", "1"), clientv3.OpPut(prefix+"b", "1"))
	ops := []clientv3.Op{
		clientv3.OpPut(prefix+"a", "2"),
		clientv3.OpDelete(prefix + "b"),
		clientv3.OpPut(prefix+"c", "1"),
		clientv3.OpPut("/elsewhere", "x"),
		clientv3.OpPut(prefix+"a", "3"),
	}
	written := make(chan int64, 1)
	r := &recorder{onReplace: func(n int, _ int64) {
		if n != 1 {
			return
		}
		rev, err := do(context.Background(), cli, ops...)
		if err != nil {
			t.Error(err)
		}
		written <- rev
	}}
	l, _ := run(t, cli, r, nil)
	last := <-written
	waitRev(t, l, last)
	r.mu.Lock()
	applied, revs := slices.Clone(r.applied), slices.Clone(r.revs)
	r.mu.Unlock()
	want := []string{"put /lw/a=2", "del /lw/b", "put /lw/c=1", "put /lw/a=3"}
	if !slices.Equal(applied, want) {
		t.Errorf("events applied: got %q, want %q", applied, want)
	}
	if !slices.IsSorted(revs) || len(slices.Compact(slices.Clone(revs))) != len(revs) {
		t.Errorf("revisions of the events: got %v, want strictly increasing", revs)
	}
	checkState(t, r, map[string]string{prefix + "a": "3", prefix + "c": "1"})
	if st := l.Stats(); st.Lists != 1 {
		t.Errorf("Stats: got %+v, want 1 listing", st)
	}
}

// When the watch's start revision has been compacted away, the Loop lists
// again and converges to what etcd holds, then follows it.
func TestCompactionForcesRelist(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	mustDo(t, cli, clientv3.OpPut(prefix+"gone", "1"), clientv3.OpPut(prefix+"changed", "1"))
	compacted := make(chan int64, 1)
	r := &recorder{onReplace: func(n int, _ int64) {
		if n != 1 {
			return
		}
		// Changes the watch would have seen, then a compaction that makes
		// it start too late to see them.
		ctx := context.Background()
		rev, err := do(ctx, cli, clientv3.OpDelete(prefix+"gone"), clientv3.OpPut(prefix+"changed", "2"), clientv3.OpPut(prefix+"new", "1"))
		if err == nil {
			_, err = cli.Compact(ctx, rev)
		}
		if err != nil {
			t.Error(err)
		}
		compacted <- rev
	}}
	l, _ := run(t, cli, r, nil)
	rev := <-compacted
	waitRev(t, l, rev)
	checkState(t, r, map[string]string{prefix + "changed": "2", prefix + "new": "1"})
	st := l.Stats()
	if st.Compactions != 1 || st.Lists != 2 || st.WatchErrors != 0 {
		t.Errorf("Stats: got %+v, want 1 compaction, 2 listings, no other watch error", st)
	}
	r.mu.Lock()
	if len(r.applied) != 0 {
		t.Errorf("events applied before the re-list: got %q, want none (compacted away)", r.applied)
	}
	r.mu.Unlock()

	after := mustDo(t, cli, clientv3.OpPut(prefix+"after", "1"))
	waitRev(t, l, after)
	checkState(t, r, map[string]string{prefix + "changed": "2", prefix + "new": "1", prefix + "after": "1"})
}

// cancellingWatcher ends the watches it started when told to, as a server
// or a broken connection would.
type cancellingWatcher struct {
	clientv3.Watcher
	mu      sync.Mutex
	cancels []context.CancelFunc
}

func (w *cancellingWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	ctx, cancel := context.WithCancel(ctx)
	w.mu.Lock()
	w.cancels = append(w.cancels, cancel)
	w.mu.Unlock()
	return w.Watcher.Watch(ctx, key, opts...)
}

// cancelAll ends every watch started so far, after waiting for the first
// one: the Loop reaches its listed revision before it starts watching.
func (w *cancellingWatcher) cancelAll(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		w.mu.Lock()
		started := len(w.cancels)
		if started > 0 {
			for _, cancel := range w.cancels {
				cancel()
			}
		}
		w.mu.Unlock()
		if started > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the Loop started no watch")
		}
		time.Sleep(5 * time.Millisecond) // polls a condition
	}
}

// A watch that ends under the Loop is followed by a new listing that
// catches up with what was missed.
func TestCancelledWatchRecovers(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	mustDo(t, cli, clientv3.OpPut(prefix+"a", "1"), clientv3.OpPut(prefix+"b", "1"))
	w := &cancellingWatcher{}
	r := &recorder{}
	l, _ := run(t, cli, r, func(l *Loop) { w.Watcher = l.watcher; l.watcher = w })
	waitRev(t, l, 1)
	w.cancelAll(t)
	rev := mustDo(t, cli, clientv3.OpPut(prefix+"b", "2"), clientv3.OpDelete(prefix+"a"))
	waitRev(t, l, rev)
	checkState(t, r, map[string]string{prefix + "b": "2"})
	after := mustDo(t, cli, clientv3.OpPut(prefix+"c", "1"))
	waitRev(t, l, after)
	checkState(t, r, map[string]string{prefix + "b": "2", prefix + "c": "1"})
	if st := l.Stats(); st.Watches != 2 || st.WatchErrors != 1 || st.Lists != 2 {
		t.Errorf("Stats: got %+v, want 2 listings and 2 watches around 1 watch error", st)
	}
}

// A progress notification moves the revision on while the prefix is quiet.
func TestProgressNotification(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	r := &recorder{}
	l, _ := run(t, cli, r, nil)
	waitRev(t, l, 1)
	rev := mustDo(t, cli, clientv3.OpPut("/elsewhere", "x"))
	// The watch's stream is the one of a leader-requiring context.
	ctx := clientv3.WithRequireLeader(ctxT(t))
	for l.Revision() < rev {
		if err := cli.RequestProgress(ctx); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_ = l.Wait(wctx, rev)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("revision: got %d, want %d", l.Revision(), rev)
		}
	}
	checkState(t, r, map[string]string{})
}

// Cancelling Run's context stops it soon, whatever it is doing, and a Loop
// runs once.
func TestRunStopsWithItsContext(t *testing.T) {
	tests := []struct {
		name     string
		stopEtcd bool
	}{
		{"watching", false},
		{"listing against a stopped etcd", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := etcdtest.Start(t)
			cli := c.Client(t)
			if tt.stopEtcd {
				c.Stop()
			}
			l, stop := run(t, cli, &recorder{}, nil)
			if tt.stopEtcd {
				deadline := time.Now().Add(wait)
				for l.Stats().ListErrors < 2 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond) // polls a condition
				}
				if st := l.Stats(); st.ListErrors < 2 || st.Lists != 0 {
					t.Fatalf("Stats: got %+v, want failed listings only", st)
				}
			} else {
				waitRev(t, l, 1)
			}
			stop()
			if err := l.Run(context.Background()); !errors.Is(err, ErrRunning) {
				t.Errorf("second Run: got %v, want ErrRunning", err)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Client: &clientv3.Client{}, Prefix: prefix, Handler: &recorder{}}
	tests := []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"ok", func(*Config) {}, true},
		{"no client", func(c *Config) { c.Client = nil }, false},
		{"no prefix", func(c *Config) { c.Prefix = "" }, false},
		{"no handler", func(c *Config) { c.Handler = nil }, false},
		{"negative page size", func(c *Config) { c.PageSize = -1 }, false},
		{"negative timeout", func(c *Config) { c.RequestTimeout = -time.Second }, false},
		{"backoff bounds reversed", func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Second, time.Millisecond }, false},
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
