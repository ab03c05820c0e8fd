package client_test

// Tests against a whole limiter (internal/dc/limiterd, run in-process)
// over a real redis-server: batching counted by the limiter's own
// metrics, and the limiter stopped and started again under load.

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/testkit/limitertest"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/pkg/client"
	"github.com/weirhq/weir/pkg/httplimit"
	"github.com/weirhq/weir/pkg/limiter"
)

const limiterdRules = `
domain: api
rules:
  - rule_id: per-user
    key_type: user_id
    limit: 1000
    window_seconds: 60
    algorithm: FixedWindow
`

func startLimiterd(t *testing.T) *limitertest.Limiterd {
	t.Helper()
	if testing.Short() {
		t.Skip("starts redis-server and a limiter")
	}
	redis := redistest.Start(t)
	return limitertest.Start(t, limiterd.Config{Redis: redis.Addr}, limiterdRules)
}

// TestBatchingAgainstLimiterd: 200 concurrent callers with batching on
// make at least 8 times fewer RPCs than calls, as the limiter counts them.
func TestBatchingAgainstLimiterd(t *testing.T) {
	lim := startLimiterd(t)
	c := newClient(t, client.Config{Addrs: []string{lim.GRPC}, Linger: 10 * time.Millisecond, Timeout: 5 * time.Second})
	const callers = 200
	before := lim.Checks(t)
	var wg sync.WaitGroup
	errs := make([]error, callers)
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			user := fmt.Sprint("batch-", i)
			resp, err := c.Check(ctx(t), limiter.Request{Items: []limiter.Item{item("user_id", user)}})
			switch {
			case err != nil:
				errs[i] = err
			case len(resp.Items) != 1 || len(resp.Items[0].Results) != 1:
				errs[i] = fmt.Errorf("caller %d: got %s, want one result", i, describe(resp))
			case resp.Items[0].Results[0].Match.Key != user || resp.Items[0].Results[0].Source != limiter.SourceStore ||
				resp.Items[0].Results[0].Remaining != 999:
				errs[i] = fmt.Errorf("caller %d: got %s, want its own key decided by the store", i, describe(resp))
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	rpcs := lim.Checks(t) - before
	t.Logf("%d calls, %d RPCs", callers, rpcs)
	if rpcs == 0 || callers/rpcs < 8 {
		t.Errorf("the limiter decided %d Check RPCs for %d calls, want at least 8 times fewer", rpcs, callers)
	}
	if s := c.Stats(); s.RPCs != rpcs {
		t.Errorf("the client counted %d RPCs, the limiter %d", s.RPCs, rpcs)
	}
}

// TestLimiterdRestart stops the limiter while callers keep checking, and
// starts it again: while it is away the failure policy answers, counted;
// once it is back, calls reach it again and find the counts Redis kept.
func TestLimiterdRestart(t *testing.T) {
	lim := startLimiterd(t)
	c := newClient(t, client.Config{Addrs: []string{lim.GRPC}, Timeout: 50 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
	reject, err := c.Site(client.Policy{OnFailure: client.Reject})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{Checker: reject})
	if err != nil {
		t.Fatal(err)
	}
	handler := mw.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	check := func(user string) limiter.RuleResult {
		t.Helper()
		resp, err := reject.Check(ctx(t), limiter.Request{Items: []limiter.Item{item("user_id", user)}})
		if err != nil || len(resp.Items) != 1 || len(resp.Items[0].Results) != 1 {
			t.Fatalf("check of %s: got %s, %v; want one result", user, describe(resp), err)
		}
		return resp.Items[0].Results[0]
	}
	serveHTTP := func() int {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		return w.Code
	}

	// Callers keep checking through the stop and the start.
	var stop atomic.Bool
	var byStore, byPolicy, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for !stop.Load() {
				resp, err := reject.Check(ctx(t), limiter.Request{Items: []limiter.Item{item("user_id", fmt.Sprint("load-", w))}})
				switch {
				case err != nil:
					failed.Add(1)
				case resp.Items[0].Results[0].Source == limiter.SourceStore:
					byStore.Add(1)
				case resp.Items[0].Results[0].Source == limiter.SourceFailureClosed:
					byPolicy.Add(1)
				}
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()

	var window time.Time // when alice's window resets
	for i := range 3 {
		r := check("alice")
		if r.Source != limiter.SourceStore || r.Remaining != int64(999-i) {
			t.Fatalf("check %d of alice: got %v remaining %d, want the store's, %d", i, r.Source, r.Remaining, 999-i)
		}
		window = r.ResetAt
	}
	if code := serveHTTP(); code != http.StatusOK {
		t.Fatalf("middleware with the limiter up: got %d, want 200", code)
	}

	lim.Stop(t)
	fallbacks := c.Stats().Fallbacks[client.Reject]
	if r := check("alice"); r.Source != limiter.SourceFailureClosed || r.Match.Rule.Spec.ID != client.UnavailableRuleID || r.RetryAfter != time.Second {
		t.Fatalf("check with the limiter down: got %v by %s retry %v, want the policy's rejection", r.Source, r.Match.Rule.Spec.ID, r.RetryAfter)
	}
	if code := serveHTTP(); code != http.StatusTooManyRequests {
		t.Errorf("middleware with the limiter down: got %d, want 429 by the policy", code)
	}
	if got := c.Stats().Fallbacks[client.Reject]; got < fallbacks+2 {
		t.Errorf("fallbacks counted: got %d, want at least %d", got, fallbacks+2)
	}

	lim.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	var back limiter.RuleResult
	for back = check("alice"); back.Source != limiter.SourceStore; back = check("alice") {
		if time.Now().After(deadline) {
			t.Fatal("checks did not reach the limiter in 10s after it started again")
		}
		time.Sleep(20 * time.Millisecond) // between polls of the condition
	}
	// The window is a minute from the epoch: the test may cross into the
	// next one, where alice starts again.
	if back.ResetAt.Equal(window) && back.Remaining != 996 {
		t.Errorf("first check of alice after the restart: remaining %d, want 996 (Redis kept the count)", back.Remaining)
	} else if !back.ResetAt.Equal(window) && back.Remaining != 999 {
		t.Errorf("first check of alice after the restart, in the next window: remaining %d, want 999", back.Remaining)
	}
	stop.Store(true)
	wg.Wait()
	if failed.Load() != 0 || byStore.Load() == 0 || byPolicy.Load() == 0 {
		t.Errorf("callers under load: %d answered by the limiter, %d by the policy, %d errors; want both answers and no error",
			byStore.Load(), byPolicy.Load(), failed.Load())
	}
	fallbacks = c.Stats().Fallbacks[client.Reject]
	for range 20 {
		if r := check("bob"); r.Source != limiter.SourceStore {
			t.Fatalf("check after the limiter came back: got %v, want the store's", r.Source)
		}
	}
	if code := serveHTTP(); code != http.StatusOK {
		t.Errorf("middleware after the limiter came back: got %d, want 200", code)
	}
	if got := c.Stats().Fallbacks[client.Reject]; got != fallbacks {
		t.Errorf("fallbacks after the limiter came back: got %d, want %d", got, fallbacks)
	}
}
