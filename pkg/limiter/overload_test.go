package limiter_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/breaker"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/store/coalesce"
	"github.com/weirhq/weir/pkg/store/redisstore"
)

// fallbackCounter counts, by reason, the decisions that went to failure
// modes, and the breaker's openings.
type fallbackCounter struct {
	by    [8]atomic.Int64
	opens atomic.Int64
}

func (f *fallbackCounter) Checked(string, *limiter.Response, time.Duration) {}
func (f *fallbackCounter) StoreCall(time.Duration, error)                   {}
func (f *fallbackCounter) BreakerState(s breaker.State) {
	if s == breaker.Open {
		f.opens.Add(1)
	}
}
func (f *fallbackCounter) FellBack(_ string, r limiter.Fallback, n int) { f.by[r].Add(int64(n)) }
func (f *fallbackCounter) total() (n int64) {
	for _, r := range limiter.Fallbacks {
		n += f.by[r].Load()
	}
	return n
}

// coalescedLimiter is a limiter over a real redis-server as limiterd
// builds it: one coalescing worker in front of the store, bounding each
// call by the limiter's adaptive timeout, default overload settings but
// Config.StorePause, pause.
func coalescedLimiter(t *testing.T, srv *redistest.Server, obs limiter.Observer, pause time.Duration) *limiter.Limiter {
	t.Helper()
	const ceiling = 200 * time.Millisecond // the default: 10 × 20ms
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: ceiling, WriteTimeout: ceiling, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rc.Close() })
	rs, err := redisstore.New(rc, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// As limiterd does: the scripts loaded before the first decision.
	if err := rs.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	co, err := coalesce.New(rs, coalesce.Config{Workers: 1, Timeout: ceiling})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(co.Close)
	l, err := limiter.New(limiter.Config{Store: co, CacheKeys: -1, Observer: obs, StorePause: pause})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := l.SetRules(compile(t, modesYAML)); err != nil {
		t.Fatal(err)
	}
	return l
}

// drive runs workers closed-loop Check calls, calls each, of the rule
// mode, with a key per call; it returns how many results came from each
// source.
func drive(t *testing.T, l *limiter.Limiter, workers, calls int, mode string) map[limiter.Source]int {
	t.Helper()
	var mu sync.Mutex
	got := map[limiter.Source]int{}
	var wg sync.WaitGroup
	var next atomic.Int64
	for range workers {
		wg.Go(func() {
			for range calls {
				k := strconv.FormatInt(next.Add(1), 10)
				resp, err := l.Check(context.Background(), limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"mode": mode, "k": k}}}})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got[resp.Items[0].Results[0].Source]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return got
}

// TestOverloadStaysOnTheStore drives the limiter closed-loop against a
// Redis made slow, not dead: a side connection keeps it busy with DEBUG
// SLEEP 25ms after 25ms, so that calls wait up to one sleep and beyond the
// 20ms floor of the store timeout — with a fixed 20ms timeout they would
// time out and open the breaker. Once the adaptive timeout has seen the
// latencies, every decision must come from the store, none from a
// failure mode, and the breaker must not open.
func TestOverloadStaysOnTheStore(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a slowed redis-server for about two seconds")
	}
	srv := redistest.Start(t, "--enable-debug-command", "yes")
	obs := &fallbackCounter{}
	l := coalescedLimiter(t, srv, obs, 0)
	side := srv.Client(t)
	ctx, stop := context.WithCancel(context.Background())
	var sleeper sync.WaitGroup
	sleeper.Go(func() {
		for ctx.Err() == nil {
			if err := side.Do(ctx, "DEBUG", "SLEEP", "0.025").Err(); err != nil && ctx.Err() == nil {
				t.Errorf("DEBUG SLEEP: %v", err)
				return
			}
			time.Sleep(25 * time.Millisecond) // Redis answers between sleeps
		}
	})
	t.Cleanup(func() { stop(); sleeper.Wait() })

	// Learning: the first calls caught by a sleep may time out at the
	// 20ms floor, before the bound has seen a latency above it.
	t.Logf("learning: %v", drive(t, l, 32, 20, "local"))
	if got := l.StoreTimeout(); got <= 20*time.Millisecond {
		t.Fatalf("adaptive store timeout after Redis slept 25ms at a time: got %v, want above the 20ms floor", got)
	}
	before, opens := obs.total(), obs.opens.Load()
	got := drive(t, l, 32, 200, "local")
	if n := got[limiter.SourceStore]; n != 32*200 {
		t.Errorf("Redis slow but answering: got %v decisions by source, want all %d from the store", got, 32*200)
	}
	if n := obs.total() - before; n != 0 {
		t.Errorf("Redis slow but answering: got %d decisions gone to failure modes, want 0", n)
	}
	if n := obs.opens.Load() - opens; n != 0 {
		t.Errorf("Redis slow but answering: the breaker opened %d times, want 0", n)
	}
	t.Logf("store timeout in force: %v", l.StoreTimeout())
}

// TestStorePauseIsWaitedOut makes Redis pause once, 100ms (DEBUG SLEEP,
// as its expiry of many keys would at a low hz), after the adaptive bound
// has learned from light load: with Config.StorePause of 150ms the bound
// covers the pause on top of twice the slowest call, and no decision
// goes to a failure mode. (Without the pause the bound is twice the few
// milliseconds of light load and the calls caught by the pause are cut;
// that is not asserted, as a noisy machine may have seen a slow call
// while learning.)
func TestStorePauseIsWaitedOut(t *testing.T) {
	if testing.Short() {
		t.Skip("learns a bound for about six seconds")
	}
	const pause = 150 * time.Millisecond
	srv := redistest.Start(t, "--enable-debug-command", "yes")
	obs := &fallbackCounter{}
	l := coalescedLimiter(t, srv, obs, pause)
	// A whole window of light calls: the bound has learned.
	for start := time.Now(); time.Since(start) < 5500*time.Millisecond; time.Sleep(10 * time.Millisecond) {
		drive(t, l, 1, 1, "local")
	}
	bound := l.StoreTimeout()
	if bound < pause {
		t.Fatalf("bound after light load: %v, want at least the pause %v", bound, pause)
	}
	side := srv.Client(t)
	if err := side.Ping(context.Background()).Err(); err != nil { // dialled before the sleep
		t.Fatal(err)
	}
	slept := make(chan error, 1)
	go func() { slept <- side.Do(context.Background(), "DEBUG", "SLEEP", "0.1").Err() }()
	time.Sleep(5 * time.Millisecond) // Redis is asleep
	before := obs.total()
	start := time.Now()
	got := drive(t, l, 8, 4, "local")
	took := time.Since(start)
	if err := <-slept; err != nil {
		t.Fatalf("DEBUG SLEEP: %v", err)
	}
	if took < 50*time.Millisecond {
		t.Fatalf("the calls took %v: they did not meet the 100ms sleep", took)
	}
	cut := obs.total() - before
	t.Logf("bound %v, decisions by source across a 100ms pause: %v", bound, got)
	if cut != 0 {
		t.Errorf("a 100ms pause under a bound of %v: %d decisions went to failure modes, want 0", bound, cut)
	}
}

// TestStoppedRedisTripsTheBreaker stops redis-server (SIGSTOP) under
// concurrent load: the breaker must open within the documented time —
// three successive timeout events, the bound doubling after each, so at
// most 3 × StoreTimeoutMax (600ms by default) — and decisions must return
// to the store after SIGCONT.
func TestStoppedRedisTripsTheBreaker(t *testing.T) {
	srv := redistest.Start(t)
	obs := &fallbackCounter{}
	l := coalescedLimiter(t, srv, obs, 0)
	// Redis up: wait for decisions from the store (the very first call
	// dials, and on a loaded machine may take longer than the floor).
	for deadline := time.Now().Add(5 * time.Second); source(t, l, context.Background()) != limiter.SourceStore; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Redis up for 5s: decisions still not from the store")
		}
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = srv.Resume()
		}
	})
	start := time.Now()
	ctx, stop := context.WithCancel(context.Background())
	var load sync.WaitGroup
	for range 8 {
		load.Go(func() {
			for ctx.Err() == nil {
				_, _ = l.Check(ctx, limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"mode": "open", "k": "x"}}}})
			}
		})
	}
	for obs.opens.Load() == 0 && time.Since(start) < 10*time.Second {
		time.Sleep(time.Millisecond)
	}
	tripped := time.Since(start)
	stop()
	load.Wait()
	const documented = 3 * 200 * time.Millisecond
	// Scheduling slack for a shared machine under the race detector.
	if tripped > documented+250*time.Millisecond {
		t.Fatalf("Redis stopped: breaker opened after %v, want within %v", tripped, documented)
	}
	t.Logf("Redis stopped: the breaker opened after %v", tripped)
	if got := source(t, l, context.Background()); got != limiter.SourceFailureOpen {
		t.Fatalf("Redis stopped, breaker open: got %v, want failure_open", got)
	}
	if obs.by[limiter.FallbackBreakerOpen].Load() == 0 || obs.by[limiter.FallbackTimeout].Load() == 0 {
		t.Errorf("Redis stopped: got fallbacks breaker_open %d, timeout %d; want both counted", obs.by[limiter.FallbackBreakerOpen].Load(), obs.by[limiter.FallbackTimeout].Load())
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	for deadline := time.Now().Add(5 * time.Second); source(t, l, context.Background()) != limiter.SourceStore; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Redis resumed for 5s: decisions still not from the store")
		}
	}
}

// heldStore holds every Decide until release is closed, telling entered
// when one arrives.
type heldStore struct {
	limiter.Store
	entered chan struct{}
	release chan struct{}
}

func (s *heldStore) Decide(ctx context.Context, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error) {
	s.entered <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.Decide(ctx, now, reqs)
}

// Past MaxInFlight, a call that finds no room within AdmitWait is shed to
// its rule's failure mode, reported as shed, and not held against the
// store: the breaker stays closed, and the call in flight is the store's.
func TestPastMaxInFlightDecisionsAreShed(t *testing.T) {
	s := &heldStore{Store: mem(t), entered: make(chan struct{}, 1), release: make(chan struct{})}
	obs := &fallbackCounter{}
	l, err := limiter.New(limiter.Config{Store: s, CacheKeys: -1, Observer: obs, MaxInFlight: 1, AdmitWait: 10 * time.Millisecond, StoreTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := l.SetRules(compile(t, modesYAML)); err != nil {
		t.Fatal(err)
	}
	first := make(chan limiter.Source, 1)
	go func() {
		resp, err := l.Check(context.Background(), limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"mode": "open", "k": "x"}}}})
		if err != nil {
			t.Error(err)
			first <- 0
			return
		}
		first <- resp.Items[0].Results[0].Source
	}()
	<-s.entered // the one request in flight the bound allows
	for range 3 {
		if got := source(t, l, context.Background()); got != limiter.SourceFailureOpen {
			t.Fatalf("no room in flight: got %v, want failure_open", got)
		}
	}
	if got := obs.by[limiter.FallbackShed].Load(); got != 3 {
		t.Errorf("got %d decisions shed, want 3", got)
	}
	if got := obs.total() - obs.by[limiter.FallbackShed].Load(); got != 0 {
		t.Errorf("got %d decisions gone to failure modes for other reasons, want 0", got)
	}
	if got := obs.opens.Load(); got != 0 {
		t.Errorf("shedding opened the breaker %d times, want 0", got)
	}
	close(s.release)
	if got := <-first; got != limiter.SourceStore {
		t.Errorf("the call in flight: got %v, want store", got)
	}
	if got := source(t, l, context.Background()); got != limiter.SourceStore {
		t.Errorf("room again: got %v, want store", got)
	}
}
