package limiter_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/wait"
	"github.com/weirhq/weir/pkg/breaker"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/store/redisstore"
)

// redisLimiter returns a limiter over a real redis-server with rules
// loaded and the hot-key cache off, on clock c (nil: the real clock);
// mut adjusts its config.
func redisLimiter(t testing.TB, srv *redistest.Server, c *fakeclock.Clock, rules string, mut ...func(*limiter.Config)) *limiter.Limiter {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 50 * time.Millisecond, ContextTimeoutEnabled: true, PoolSize: 64})
	t.Cleanup(func() { _ = rc.Close() })
	rs, err := redisstore.New(rc, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := limiter.Config{Store: rs, CacheKeys: -1}
	if c != nil {
		cfg.Now = c.Now
	}
	for _, m := range mut {
		m(&cfg)
	}
	l, err := limiter.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := l.SetRules(compile(t, rules)); err != nil {
		t.Fatal(err)
	}
	return l
}

func source(t *testing.T, l *limiter.Limiter, ctx context.Context) limiter.Source {
	t.Helper()
	resp, err := l.Check(ctx, limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"mode": "open", "k": "x"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Items[0].Results[0].Source
}

// TestStatusDuringOutageLetsTheBreakerRecover: a Status call that takes
// the half-open breaker's probe must report how it went, or the breaker
// stays half-open and the limiter never uses the store again.
func TestStatusDuringOutageLetsTheBreakerRecover(t *testing.T) {
	srv := redistest.Start(t)
	c := newClock()
	l := redisLimiter(t, srv, c, modesYAML)
	srv.Stop()
	for range 3 {
		source(t, l, context.Background())
	}
	if got := source(t, l, context.Background()); got != limiter.SourceFailureOpen {
		t.Fatalf("Redis dead: got %v, want failure_open", got)
	}
	c.Advance(time.Second) // past the breaker's cooldown
	if _, err := l.Status(context.Background(), "", "open", "x"); err == nil {
		t.Fatal("status with Redis dead: got nil error")
	}
	srv.Restart(t)
	// A wall-clock allowance for a loaded machine (it once ran out at 3s
	// with four test packages at once); a breaker stuck half-open never
	// recovers, however long.
	wait.For(t, 10*time.Second, "decisions from the store again after Redis restarted (the fake clock far past every cooldown)", func() bool {
		c.Advance(time.Second)
		return source(t, l, context.Background()) == limiter.SourceStore
	})
}

// TestCancelledCallersDoNotOpenTheBreaker: callers that gave up say
// nothing about the store, so they must not open its breaker; nor are
// they answered from a failure mode (which would count failure_local
// decisions that nobody received, while the store is fine): they get
// their context's error.
func TestCancelledCallersDoNotOpenTheBreaker(t *testing.T) {
	srv := redistest.Start(t)
	l := redisLimiter(t, srv, newClock(), modesYAML)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for range 5 {
		_, err := l.Check(cancelled, limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"mode": "local", "k": "x"}}}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled caller: got %v, want an error wrapping context.Canceled", err)
		}
	}
	if got := source(t, l, context.Background()); got != limiter.SourceStore {
		t.Fatalf("healthy Redis after 5 cancelled callers: got %v, want store", got)
	}
}

// breakerStates records the store breaker's states in order.
type breakerStates struct {
	mu     sync.Mutex
	states []breaker.State
}

func (b *breakerStates) Checked(string, *limiter.Response, time.Duration) {}
func (b *breakerStates) StoreCall(time.Duration, error)                   {}
func (b *breakerStates) BreakerState(s breaker.State) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.states = append(b.states, s)
}

func (b *breakerStates) last() breaker.State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.states[len(b.states)-1]
}

// TestClosedLimiterGivesProbesBack: a closed limiter starts no probe, so a
// probe the breaker grants it must go back, or the breaker stays
// half-open — a probe in flight that never ends — for good.
func TestClosedLimiterGivesProbesBack(t *testing.T) {
	srv := redistest.Start(t)
	c := newClock()
	states := &breakerStates{}
	l := redisLimiter(t, srv, c, modesYAML, func(cfg *limiter.Config) { cfg.Observer = states })
	srv.Stop()
	for range 4 {
		source(t, l, context.Background())
	}
	if got := states.last(); got != breaker.Open {
		t.Fatalf("Redis dead: breaker %v, want open", got)
	}
	l.Close()
	for range 3 {
		c.Advance(time.Second) // past the breaker's cooldown: Allow grants a probe
		if got := source(t, l, context.Background()); got != limiter.SourceFailureOpen {
			t.Fatalf("closed limiter, Redis dead: got %v, want failure_open", got)
		}
		if got := states.last(); got != breaker.Open {
			t.Fatalf("after a probe granted to a closed limiter: breaker %v, want open (the probe given back)", got)
		}
	}
}
