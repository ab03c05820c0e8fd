package coalesce_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/storetest"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/store/coalesce"
	"github.com/weirhq/weir/pkg/store/memstore"
	"github.com/weirhq/weir/pkg/store/redisstore"
)

var _ storetest.Store = (*coalesce.Coalescer)(nil)

func newCoalescer(t testing.TB, inner coalesce.Store, cfg coalesce.Config) *coalesce.Coalescer {
	t.Helper()
	c, err := coalesce.New(inner, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// The coalescer is a store: it passes the whole conformance suite, over
// memory and over Redis.
func TestConformance(t *testing.T) {
	storetest.Run(t, "coalesced-memory", func(t *testing.T) storetest.Store {
		m, err := memstore.New(memstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return newCoalescer(t, m, coalesce.Config{Timeout: 5 * time.Second})
	})
	storetest.Run(t, "coalesced-memory-bounded", func(t *testing.T) storetest.Store {
		m, err := memstore.New(memstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return newCoalescer(t, m, coalesce.Config{Timeout: 5 * time.Second, Bound: 5 * time.Second})
	})
	srv := redistest.Start(t)
	rc := srv.Client(t)
	var n atomic.Int64
	storetest.Run(t, "coalesced-redis", func(t *testing.T) storetest.Store {
		s, err := redisstore.New(rc, redisstore.Config{Prefix: fmt.Sprintf("c%d", n.Add(1))})
		if err != nil {
			t.Fatal(err)
		}
		return newCoalescer(t, s, coalesce.Config{Timeout: 5 * time.Second})
	})
}

// gate holds the first inner call until released, and records the size
// of every call.
type gate struct {
	coalesce.Store
	first   chan struct{}
	release chan struct{}
	mu      sync.Mutex
	sizes   []int
}

func (g *gate) Decide(ctx context.Context, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error) {
	g.mu.Lock()
	g.sizes = append(g.sizes, len(reqs))
	n := len(g.sizes)
	g.mu.Unlock()
	if n == 1 {
		close(g.first)
		<-g.release
	}
	return g.Store.Decide(ctx, now, reqs)
}

func TestConcurrentCallsAreMerged(t *testing.T) {
	m, _ := memstore.New(memstore.Config{})
	g := &gate{Store: m, first: make(chan struct{}), release: make(chan struct{})}
	c := newCoalescer(t, g, coalesce.Config{Workers: 1})
	p := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 100, Window: time.Minute}
	call := func(key string) error {
		res, err := c.Decide(context.Background(), storetest.T0, []algorithm.Request{{Key: key, Params: p, Cost: 1}})
		if err == nil && (len(res) != 1 || res[0].Err != nil || !res[0].Allowed) {
			err = fmt.Errorf("got %+v", res)
		}
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, 11)
	wg.Go(func() { errs <- call("first") })
	<-g.first // the only worker is busy: the next ten queue up
	for i := range 10 {
		wg.Go(func() { errs <- call(fmt.Sprint("k", i)) })
	}
	time.Sleep(50 * time.Millisecond)
	close(g.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.sizes) != 2 || g.sizes[1] != 10 {
		t.Fatalf("got inner calls of sizes %v, want [1 10]", g.sizes)
	}
}

func TestCallerDeadlineAndClose(t *testing.T) {
	m, _ := memstore.New(memstore.Config{})
	g := &gate{Store: m, first: make(chan struct{}), release: make(chan struct{})}
	c, err := coalesce.New(g, coalesce.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 1, Window: time.Minute}
	reqs := []algorithm.Request{{Key: "k", Params: p, Cost: 1}}
	go func() { _, _ = c.Decide(context.Background(), storetest.T0, reqs) }()
	<-g.first
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Decide(ctx, storetest.T0, reqs); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("caller deadline while the worker is busy: got %v, want DeadlineExceeded", err)
	}
	close(g.release)
	c.Close()
	if _, err := c.Decide(context.Background(), storetest.T0, reqs); !errors.Is(err, coalesce.ErrClosed) {
		t.Fatalf("after Close: got %v, want ErrClosed", err)
	}
	if _, err := coalesce.New(m, coalesce.Config{Workers: -1}); err == nil {
		t.Fatal("negative Workers: got nil error")
	}
}

// With a Bound, calls stuck behind a busy worker are answered with
// ErrTimeout, not left waiting on their (deadline-less) contexts; once the
// worker is free, calls are decided again.
func TestBoundAnswersStuckCalls(t *testing.T) {
	m, _ := memstore.New(memstore.Config{})
	g := &gate{Store: m, first: make(chan struct{}), release: make(chan struct{})}
	const bound = 20 * time.Millisecond
	c := newCoalescer(t, g, coalesce.Config{Workers: 1, Bound: bound})
	if got := c.CallBound(); got != bound {
		t.Fatalf("got CallBound %v, want %v", got, bound)
	}
	p := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 100, Window: time.Minute}
	reqs := []algorithm.Request{{Key: "k", Params: p, Cost: 1}}
	firstErr := make(chan error, 1)
	go func() {
		_, err := c.Decide(context.Background(), storetest.T0, reqs)
		firstErr <- err
	}()
	<-g.first // the only worker is busy: the next calls can only time out
	errs := make(chan error, 20)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, err := c.Decide(context.Background(), storetest.T0, reqs)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, coalesce.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call behind a busy worker: got %v, want ErrTimeout and DeadlineExceeded", err)
		}
	}
	if err := <-firstErr; !errors.Is(err, coalesce.ErrTimeout) {
		t.Fatalf("call held by the store: got %v, want ErrTimeout", err)
	}
	close(g.release)
	res, err := c.Decide(context.Background(), storetest.T0, reqs)
	if err != nil || len(res) != 1 || res[0].Err != nil || !res[0].Allowed {
		t.Fatalf("worker free again: got %+v, %v; want allowed", res, err)
	}
	// A caller whose context is done is not queued.
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := c.Decide(cancelled, storetest.T0, reqs); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: got %v, want Canceled", err)
	}
	if _, err := coalesce.New(m, coalesce.Config{Bound: -time.Second}); err == nil {
		t.Fatal("negative Bound: got nil error")
	}
}

// A call whose node's queue is full (the node does not answer) is still
// answered at its bound, though it was never queued.
func TestBoundAnswersCallsBehindAFullQueue(t *testing.T) {
	m, _ := memstore.New(memstore.Config{})
	g := &gate{Store: m, first: make(chan struct{}), release: make(chan struct{})}
	const bound = 20 * time.Millisecond
	c := newCoalescer(t, g, coalesce.Config{Workers: 1, Bound: bound})
	p := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 1 << 20, Window: time.Minute}
	reqs := []algorithm.Request{{Key: "k", Params: p, Cost: 1}}
	call := func() error {
		_, err := c.DecideOn(context.Background(), "n", bound, storetest.T0, reqs)
		return err
	}
	go func() { _ = call() }()
	<-g.first // the node's only worker is held: what follows fills its queue
	defer close(g.release)
	const queued = 1024 // a node's queue (startLane)
	var wg sync.WaitGroup
	for range queued {
		wg.Go(func() { _ = call() })
	}
	wg.Wait() // each answered at its bound; their jobs still fill the queue
	last := make(chan error, 1)
	go func() { last <- call() }()
	select {
	case err := <-last:
		if !errors.Is(err, coalesce.ErrTimeout) {
			t.Fatalf("call behind a full queue: got %v, want ErrTimeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("call behind a full queue not answered at its bound %v", bound)
	}
}

// A caller that gives up before the bound — its deadline passes, or it
// hangs up — stops waiting then, with its own error, not the store's
// timeout.
func TestCallerGivesUpBeforeBound(t *testing.T) {
	m, _ := memstore.New(memstore.Config{})
	g := &gate{Store: m, first: make(chan struct{}), release: make(chan struct{})}
	const bound = 10 * time.Second
	c := newCoalescer(t, g, coalesce.Config{Workers: 1, Bound: bound})
	p := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 100, Window: time.Minute}
	reqs := []algorithm.Request{{Key: "k", Params: p, Cost: 1}}
	go func() { _, _ = c.Decide(context.Background(), storetest.T0, reqs) }()
	<-g.first // the only worker is held: the calls below wait
	defer close(g.release)
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 10*time.Millisecond)
		}, context.DeadlineExceeded},
		{"hung up", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(10*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			if _, err := c.Decide(ctx, storetest.T0, reqs); !errors.Is(err, tc.want) || errors.Is(err, coalesce.ErrTimeout) {
				t.Fatalf("got %v, want %v alone", err, tc.want)
			}
			if waited := time.Since(start); waited >= bound/2 {
				t.Fatalf("gave up after 10ms, bound %v: waited %v", bound, waited)
			}
		})
	}
}

// DecideWithin bounds each call by its own duration: a short bound given
// after a long one still expires first (the waiting list stays in
// deadline order), and the long one is answered by the store once free.
func TestDecideWithinKeepsEachCallsBound(t *testing.T) {
	m, _ := memstore.New(memstore.Config{})
	g := &gate{Store: m, first: make(chan struct{}), release: make(chan struct{})}
	c := newCoalescer(t, g, coalesce.Config{Workers: 1})
	p := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 100, Window: time.Minute}
	reqs := []algorithm.Request{{Key: "k", Params: p, Cost: 1}}
	held := make(chan error, 1)
	go func() {
		_, err := c.DecideWithin(context.Background(), time.Minute, storetest.T0, reqs)
		held <- err
	}()
	<-g.first // the only worker is busy
	long := make(chan error, 1)
	go func() {
		_, err := c.DecideWithin(context.Background(), time.Minute, storetest.T0, reqs)
		long <- err
	}()
	start := time.Now()
	_, err := c.DecideWithin(context.Background(), 20*time.Millisecond, storetest.T0, reqs)
	if !errors.Is(err, coalesce.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("short bound behind a busy worker: got %v, want ErrTimeout and DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("short bound of 20ms: answered after %v", took)
	}
	select {
	case err := <-long:
		t.Fatalf("long bound: answered %v before the store was free", err)
	default:
	}
	close(g.release)
	if err := <-held; err != nil {
		t.Fatalf("call held by the store: got %v, want nil", err)
	}
	if err := <-long; err != nil {
		t.Fatalf("long bound, store free: got %v, want nil", err)
	}
}

// stuck holds every call with a request on the key "dead" until its
// context is done; it tells entered of each such call.
type stuck struct {
	coalesce.Store
	entered chan struct{}
}

func (s *stuck) Decide(ctx context.Context, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error) {
	for _, r := range reqs {
		if r.Key == "dead" {
			s.entered <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
	return s.Store.Decide(ctx, now, reqs)
}

// TestNodesDoNotWaitOnEachOther: with one worker, a call of a node that
// does not answer holds up no call of another node (DecideOn), while the
// calls that name no node still queue behind each other.
func TestNodesDoNotWaitOnEachOther(t *testing.T) {
	m, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	inner := &stuck{Store: m, entered: make(chan struct{}, 8)}
	c := newCoalescer(t, inner, coalesce.Config{Workers: 1, Timeout: time.Second})
	params := algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 10, Window: time.Minute}
	now := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deadDone := make(chan error, 1)
	go func() {
		_, err := c.DecideOn(ctx, "10.0.0.1:6379", 0, now, []algorithm.Request{{Key: "dead", Params: params, Cost: 1}})
		deadDone <- err
	}()
	<-inner.entered // the dead node's call is in flight, on its lane's only worker

	for i := range 3 {
		res, err := c.DecideOn(context.Background(), "10.0.0.2:6379", 0, now, []algorithm.Request{{Key: "live", Params: params, Cost: 1}})
		if err != nil || len(res) != 1 || !res[0].Decision.Allowed || res[0].Decision.Remaining != int64(9-i) {
			t.Fatalf("live node's call %d with the dead one stuck: got %+v, %v; want decided", i, res, err)
		}
	}
	select {
	case err := <-deadDone:
		t.Fatalf("the dead node's call returned (%v) before it was released", err)
	default:
	}

	// A call that names no node goes to the shared lane: not behind the
	// dead node either.
	if res, err := c.Decide(context.Background(), now, []algorithm.Request{{Key: "shared", Params: params, Cost: 1}}); err != nil || !res[0].Decision.Allowed {
		t.Fatalf("shared call with the dead node stuck: got %+v, %v", res, err)
	}
	// A second call of the dead node queues behind the first: its
	// caller's deadline ends its wait.
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if _, err := c.DecideOn(short, "10.0.0.1:6379", 0, now, []algorithm.Request{{Key: "other", Params: params, Cost: 1}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second call of the stuck node: got %v, want its caller's deadline", err)
	}
	cancel()
	if err := <-deadDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the dead node's call: got %v, want its cancellation", err)
	}
}
