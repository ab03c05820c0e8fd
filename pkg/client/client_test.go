package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/internal/testkit/deadpeer"
	"github.com/weirhq/weir/internal/testkit/limitertest"
	"github.com/weirhq/weir/pkg/client"
	"github.com/weirhq/weir/pkg/httplimit"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/ruleset"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

var (
	_ httplimit.Checker = (*client.Client)(nil)
	_ httplimit.Checker = (*client.Site)(nil)
)

const rulesYAML = `
domain: web
rules:
  - rule_id: per-user
    key_type: user_id
    limit: 2
    window_seconds: 60
    algorithm: FixedWindow
  - rule_id: free-tier
    conditions: {tier: free}
    key_type: user_id
    limit: 1
    window_seconds: 10
    algorithm: FixedWindow
    rejection_message: Upgrade for more.
    retry_advice: exponential_backoff
  - rule_id: trial
    conditions: {trial: "*"}
    key_type: user_id
    limit: 1
    window_seconds: 60
    shadow: true
  - rule_id: health
    path_pattern: /health
    unlimited: true
  - rule_id: wide
    key_type: [a, b, c, d, e]
    limit: 5
    window_seconds: 60
`

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func fixed() time.Time { return t0 }

// counter counts the weir.v1 Check RPCs a server receives and the items
// in them, and keeps the item count of each all_or_nothing one.
type counter struct {
	rpcs, items atomic.Int64
	mu          sync.Mutex
	allOrNone   []int
}

func (c *counter) interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if info.FullMethod == "/weir.v1.Limiter/Check" {
		r := req.(*weirv1.CheckRequest)
		c.rpcs.Add(1)
		c.items.Add(int64(len(r.GetItems())))
		if r.GetAllOrNothing() {
			c.mu.Lock()
			c.allOrNone = append(c.allOrNone, len(r.GetItems()))
			c.mu.Unlock()
		}
	}
	return h(ctx, req)
}

// allOrNothingRPCs returns the item count of each all_or_nothing Check
// received.
func (c *counter) allOrNothingRPCs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.allOrNone)
}

// serve starts a limiter with rules behind a weir.v1 server that counts
// RPCs.
func serve(t *testing.T, rules string) (string, *counter) {
	t.Helper()
	n := &counter{}
	return limitertest.Serve(t, limitertest.New(t, rules, fixed), grpc.UnaryInterceptor(n.interceptor)), n
}

func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func item(kv ...string) limiter.Item {
	attrs := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		attrs[kv[i]] = kv[i+1]
	}
	return limiter.Item{Attributes: attrs}
}

// describe renders what a response says, as weir.v1 can carry it.
func describe(resp limiter.Response) string {
	var b strings.Builder
	fmt.Fprintf(&b, "allowed=%v", resp.Allowed)
	for i, it := range resp.Items {
		fmt.Fprintf(&b, "\n item %d allowed=%v decisive=%d", i, it.Allowed, it.Decisive)
		for _, r := range it.Results {
			spec := r.Match.Rule.Spec
			msg := ""
			if !r.Allowed {
				msg = spec.RejectionMessage
			}
			// A result without a limit has no reset: weir.v1 leaves it out.
			reset := "-"
			if r.Limited() {
				reset = r.ResetAt.UTC().Format(time.RFC3339Nano)
			}
			fmt.Fprintf(&b, "\n  %s key=%q allowed=%v limit=%d remaining=%d reset=%s retry=%v source=%v shadow=%v hits=%d window=%d advice=%s msg=%q refunded=%v",
				spec.ID, r.Match.Key, r.Allowed, r.Limit, r.Remaining, reset, r.RetryAfter,
				r.Source, r.Shadow(), r.Hits, spec.WindowSeconds, spec.RetryAdvice, msg, r.Refunded)
		}
	}
	return b.String()
}

// TestCheckAnswersAsTheLimiter runs the same requests through the client,
// against a remote limiter, and through an in-process limiter with the
// same rules and clock: the answers must say the same.
func TestCheckAnswersAsTheLimiter(t *testing.T) {
	for _, linger := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprintf("linger=%v", linger), func(t *testing.T) {
			local := limitertest.New(t, rulesYAML, fixed)
			addr, _ := serve(t, rulesYAML)
			c := newClient(t, client.Config{Addrs: []string{addr}, Linger: linger, Timeout: 5 * time.Second})
			long := strings.Repeat("v", 1000)
			for i, req := range []limiter.Request{
				{Items: []limiter.Item{item("user_id", "alice")}},
				{Items: []limiter.Item{item("user_id", "alice"), item("user_id", "bob")}},
				{Items: []limiter.Item{item("user_id", "alice")}},
				{Domain: "web", Items: []limiter.Item{item("user_id", "carol", "tier", "free")}},
				{Items: []limiter.Item{{Attributes: map[string]string{"user_id": "carol", "tier": "free"}, Hits: 3}}},
				{Items: []limiter.Item{item("user_id", "dave", "trial", "yes"), item("user_id", "dave", "trial", "yes")}},
				{Items: []limiter.Item{item("path", "/health"), item("other", "x")}},
				{Items: []limiter.Item{item("a", long, "b", long, "c", "1", "d", "2", "e", "3")}},
				// ZeroHits changes nothing when Hits is above 0.
				{Items: []limiter.Item{{Attributes: map[string]string{"user_id": "erin"}, Hits: 2, ZeroHits: true}}},
				// alice is over per-user: frank's hit is given back, and
				// without RefundOnReject spent.
				{Items: []limiter.Item{item("user_id", "frank"), item("user_id", "alice")}, RefundOnReject: true},
				{Items: []limiter.Item{item("user_id", "frank"), item("user_id", "alice")}},
				{Items: []limiter.Item{item("user_id", "frank"), item("user_id", "gina")}, RefundOnReject: true},
			} {
				want, err := local.Check(ctx(t), req)
				if err != nil {
					t.Fatalf("request %d: in-process: %v", i, err)
				}
				got, err := c.Check(ctx(t), req)
				if err != nil {
					t.Fatalf("request %d: client: %v", i, err)
				}
				if g, w := describe(got), describe(want); g != w {
					t.Errorf("request %d:\ngot  %s\nwant %s", i, g, w)
				}
			}
			if s := c.Stats(); s.Checks != 12 || s.Items != 18 || s.RPCs != 12 || s.RPCErrors != 0 {
				t.Errorf("stats: got %+v, want 12 checks, 18 items, 12 RPCs, no errors", s)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	addr, n := serve(t, rulesYAML)
	noRules, _ := serve(t, "")
	c := newClient(t, client.Config{Addrs: []string{addr}, Timeout: 5 * time.Second})
	bare := newClient(t, client.Config{Addrs: []string{noRules}, Timeout: 5 * time.Second, Policy: client.Policy{OnFailure: client.Fail}})
	huge := strings.Repeat("v", limiter.MaxValueLen)
	for _, tc := range []struct {
		name     string
		c        *client.Client
		req      limiter.Request
		want     []error
		wantRPCs int64
	}{
		{"no items", c, limiter.Request{}, []error{limiter.ErrInvalid}, 0},
		{"negative hits", c, limiter.Request{Items: []limiter.Item{{Hits: -1}}}, []error{limiter.ErrInvalid}, 0},
		{"value too long", c, limiter.Request{Items: []limiter.Item{item("user_id", huge+"x")}}, []error{limiter.ErrInvalid}, 0},
		{"exact", c, limiter.Request{Items: []limiter.Item{{Exact: true}}}, []error{limiter.ErrInvalid}, 0},
		// Fields weir.v1 does not carry: sent, they would be dropped
		// (a check meant to spend nothing would spend 1).
		{"zero hits", c, limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"user_id": "zh"}, ZeroHits: true}}}, []error{limiter.ErrInvalid}, 0},
		{"count rejected", c, limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"user_id": "cr"}, CountRejected: true}}}, []error{limiter.ErrInvalid}, 0},
		{"match", c, limiter.Request{Items: []limiter.Item{{Match: ruleset.Match{Rule: &ruleset.Rule{}, Key: "k", Limit: 1}}}}, []error{limiter.ErrInvalid}, 0},
		// protobuf strings must be UTF-8: such a request cannot be sent.
		{"value not UTF-8", c, limiter.Request{Items: []limiter.Item{item("user_id", "\xff\xfe")}}, []error{limiter.ErrInvalid}, 0},
		{"name not UTF-8", c, limiter.Request{Items: []limiter.Item{item("\xffname", "v")}}, []error{limiter.ErrInvalid}, 0},
		{"domain not UTF-8", c, limiter.Request{Domain: "we\xffb", Items: []limiter.Item{item("user_id", "a")}}, []error{limiter.ErrInvalid}, 0},
		{"second item not UTF-8", c, limiter.Request{Items: []limiter.Item{item("user_id", "a"), item("user_id", "\xed\xa0\x80")}}, []error{limiter.ErrInvalid}, 0},
		{"key too long, found by the server", c, limiter.Request{Items: []limiter.Item{item("a", huge, "b", huge, "c", huge, "d", huge, "e", huge)}}, []error{limiter.ErrInvalid}, 1},
		{"unknown domain", c, limiter.Request{Domain: "nope", Items: []limiter.Item{item("user_id", "a")}}, []error{limiter.ErrUnknownDomain}, 1},
		{"no rules, policy fail", bare, limiter.Request{Items: []limiter.Item{item("user_id", "a")}}, []error{client.ErrUnavailable, limiter.ErrNoRules}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := n.rpcs.Load()
			_, err := tc.c.Check(ctx(t), tc.req)
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("got %v, want an error matching %v", err, w)
				}
			}
			if got := n.rpcs.Load() - before; got != tc.wantRPCs {
				t.Errorf("got %d RPCs, want %d", got, tc.wantRPCs)
			}
		})
	}
	_, err := c.Check(ctx(t), limiter.Request{Domain: "nope", Items: []limiter.Item{item("user_id", "a")}})
	if st, ok := status.FromError(err); !ok || st.Code() != codes.InvalidArgument {
		t.Errorf("unknown domain: got status %v, want InvalidArgument carried", st)
	}
}

// blackhole returns the address of a weir.v1 server whose Checks never
// answer (until the caller gives up).
func blackhole(t *testing.T) string {
	return limitertest.Serve(t, limitertest.New(t, rulesYAML, fixed), grpc.UnaryInterceptor(
		func(ctx context.Context, _ any, _ *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}))
}

// refused returns a loopback address nothing listens on.
func TestFailurePolicies(t *testing.T) {
	local := limitertest.New(t, `
domain: web
rules:
  - rule_id: conservative
    key_type: user_id
    limit: 1
    window_seconds: 60
`, fixed)
	noRules, _ := serve(t, "")
	targets := []struct{ name, addr string }{
		{"unreachable", deadpeer.Addr(t)},
		{"too slow", blackhole(t)},
		{"unavailable (no rules)", noRules},
	}
	for _, target := range targets {
		for _, tc := range []struct {
			policy client.Policy
			check  func(t *testing.T, first, second limiter.Response, err error)
		}{
			{client.Policy{}, func(t *testing.T, first, second limiter.Response, err error) {
				if err != nil || !first.Allowed || first.Items[0].Decisive != -1 || !second.Allowed {
					t.Errorf("allow: got %s, %v; want allowed, no rule", describe(first), err)
				}
			}},
			{client.Policy{OnFailure: client.Reject, RetryAfter: 3 * time.Second}, func(t *testing.T, first, _ limiter.Response, err error) {
				if err != nil || first.Allowed || len(first.Items[0].Results) != 1 {
					t.Fatalf("reject: got %s, %v; want rejected", describe(first), err)
				}
				r := first.Items[0].Results[0]
				if r.Match.Rule.Spec.ID != client.UnavailableRuleID || r.RetryAfter != 3*time.Second || r.Source != limiter.SourceFailureClosed {
					t.Errorf("reject: got %s, want rule %s, retry 3s, source failure_closed", describe(first), client.UnavailableRuleID)
				}
			}},
			{client.Policy{OnFailure: client.Local, Local: local}, func(t *testing.T, first, second limiter.Response, err error) {
				if err != nil || !first.Allowed || second.Allowed || first.Items[0].Results[0].Match.Rule.Spec.ID != "conservative" {
					t.Errorf("local: got %s then %s, %v; want the local limiter's allow then reject", describe(first), describe(second), err)
				}
			}},
			{client.Policy{OnFailure: client.Fail}, func(t *testing.T, _, _ limiter.Response, err error) {
				if !errors.Is(err, client.ErrUnavailable) {
					t.Errorf("fail: got %v, want ErrUnavailable", err)
				}
			}},
		} {
			t.Run(target.name+"/"+tc.policy.OnFailure.String(), func(t *testing.T) {
				c := newClient(t, client.Config{Addrs: []string{target.addr}, Timeout: 30 * time.Millisecond})
				site, err := c.Site(tc.policy)
				if err != nil {
					t.Fatal(err)
				}
				user := target.name + tc.policy.OnFailure.String()
				req := limiter.Request{Items: []limiter.Item{item("user_id", user)}}
				first, err := site.Check(ctx(t), req)
				second, err2 := site.Check(ctx(t), req)
				tc.check(t, first, second, errors.Join(err, err2))
				if got := c.Stats().Fallbacks[tc.policy.OnFailure]; got != 2 {
					t.Errorf("fallbacks %s: got %d, want 2", tc.policy.OnFailure, got)
				}
			})
		}
	}
}

// batchMode is one way a Check goes out, as Config's Linger and MaxBatch
// set it.
type batchMode struct {
	name     string
	linger   time.Duration
	maxBatch int
}

// batchModes are the ways a Check goes out: alone, waiting in a batch
// for others, and filling a batch (of one), which sends it.
func batchModes() []batchMode {
	return []batchMode{
		{"unbatched", 0, 0},
		{"waiting in a batch", time.Millisecond, 0},
		{"filling a batch", time.Hour, 1},
	}
}

// TestCallerDeadline: a caller whose own context ends gets its error, at
// its own deadline, not the policy and not after Config.Timeout — also
// when its Check fills a batch, which then goes on without it.
func TestCallerDeadline(t *testing.T) {
	for _, tc := range batchModes() {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, client.Config{Addrs: []string{blackhole(t)}, Timeout: 5 * time.Second, Linger: tc.linger, MaxBatch: tc.maxBatch})
			cctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			start := time.Now()
			_, err := c.Check(cctx, limiter.Request{Items: []limiter.Item{item("user_id", "a")}})
			took := time.Since(start)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("got %v, want the caller's deadline", err)
			}
			if took > time.Second {
				t.Errorf("returned after %v, want about the caller's 50ms deadline (Timeout is 5s)", took)
			}
			if s := c.Stats(); s.Fallbacks[client.Allow] != 0 {
				t.Errorf("got %d fallbacks, want none", s.Fallbacks[client.Allow])
			}
		})
	}
}

// TestCallerGaveUp: a Check whose context is done before it starts
// returns the context's error and sends nothing, batched or not.
func TestCallerGaveUp(t *testing.T) {
	addr, n := serve(t, rulesYAML)
	for _, tc := range batchModes() {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, client.Config{Addrs: []string{addr}, Timeout: 5 * time.Second, Linger: tc.linger, MaxBatch: tc.maxBatch})
			done, cancel := context.WithCancel(context.Background())
			cancel()
			before := n.rpcs.Load()
			_, err := c.Check(done, limiter.Request{Items: []limiter.Item{item("user_id", "gave-up")}})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("got %v, want context.Canceled", err)
			}
			time.Sleep(20 * time.Millisecond) // past the linger
			if got := n.rpcs.Load() - before; got != 0 {
				t.Errorf("got %d RPCs, want none: the check would spend quota", got)
			}
		})
	}
}

// TestSplit: a request of more items than an RPC may carry is split, and
// its results come back in order.
func TestSplit(t *testing.T) {
	addr, n := serve(t, rulesYAML)
	for _, tc := range []struct {
		name     string
		maxBatch int
		items    int
		wantRPCs int64
	}{
		{"default, 600 items", 0, 600, 3},
		{"max batch 10, 25 items", 10, 25, 3},
		{"exactly one batch", 10, 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, client.Config{Addrs: []string{addr}, MaxBatch: tc.maxBatch, Timeout: 5 * time.Second})
			req := limiter.Request{}
			for i := range tc.items {
				req.Items = append(req.Items, item("user_id", fmt.Sprintf("%s-%d", tc.name, i)))
			}
			before := n.rpcs.Load()
			resp, err := c.Check(ctx(t), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := n.rpcs.Load() - before; got != tc.wantRPCs {
				t.Errorf("got %d RPCs, want %d", got, tc.wantRPCs)
			}
			for i, it := range resp.Items {
				if want := fmt.Sprintf("%s-%d", tc.name, i); len(it.Results) != 1 || it.Results[0].Match.Key != want {
					t.Fatalf("item %d: got %s, want key %s", i, describe(resp), want)
				}
			}
		})
	}
}

// A check with RefundOnReject goes in one RPC of its own, with
// all_or_nothing: never split at MaxBatch, never batched with concurrent
// checks; past what one Check holds it is refused before anything is sent.
func TestRefundOnRejectAlone(t *testing.T) {
	addr, n := serve(t, rulesYAML)
	c := newClient(t, client.Config{Addrs: []string{addr}, Linger: 50 * time.Millisecond, MaxBatch: 10, Timeout: 5 * time.Second})
	var many limiter.Request
	for i := range 25 {
		many.Items = append(many.Items, item("user_id", fmt.Sprint("many-", i)))
	}
	many.RefundOnReject = true
	var wg sync.WaitGroup
	errs := make(chan error, 21)
	for i := range 20 {
		wg.Go(func() {
			_, err := c.Check(ctx(t), limiter.Request{Items: []limiter.Item{item("user_id", fmt.Sprint("plain-", i))}})
			errs <- err
		})
	}
	wg.Go(func() {
		_, err := c.Check(ctx(t), limiter.Request{Items: []limiter.Item{item("user_id", "alone")}, RefundOnReject: true})
		errs <- err
	})
	resp, err := c.Check(ctx(t), many)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(resp.Items) != 25 || !resp.Allowed {
		t.Fatalf("25 items under their limits: %s", describe(resp))
	}
	got := n.allOrNothingRPCs()
	slices.Sort(got)
	if !slices.Equal(got, []int{1, 25}) {
		t.Errorf("all_or_nothing RPCs of %v items, want one of 1 and one of 25", got)
	}
	if sent := n.items.Load(); sent != 46 {
		t.Errorf("%d items sent, want 46", sent)
	}

	before := n.rpcs.Load()
	many.Items = append(many.Items, make([]limiter.Item, limiter.MaxItems+1-len(many.Items))...)
	for i := range many.Items {
		many.Items[i] = item("user_id", fmt.Sprint("over-", i))
	}
	if _, err := c.Check(ctx(t), many); !errors.Is(err, limiter.ErrInvalid) || !strings.Contains(err.Error(), "RefundOnReject with 257 items") {
		t.Errorf("257 items with RefundOnReject: got %v, want limiter.ErrInvalid naming RefundOnReject", err)
	}
	if n.rpcs.Load() != before {
		t.Error("a refused check sent an RPC")
	}
}

// A limiter that ignores all_or_nothing (one older than it: here, an
// interceptor that clears the field) spends the allowed items of a
// rejected check: the client says so with ErrNotGivenBack rather than
// answer as if they were given back. A check it allows, or one without
// RefundOnReject, is answered as ever.
func TestRefundOnRejectIgnored(t *testing.T) {
	ignore := grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if r, ok := req.(*weirv1.CheckRequest); ok {
			r.AllOrNothing = false
		}
		return h(ctx, req)
	})
	addr := limitertest.Serve(t, limitertest.New(t, rulesYAML, fixed), ignore)
	c := newClient(t, client.Config{Addrs: []string{addr}, Timeout: 5 * time.Second})
	for range 2 {
		if _, err := c.Check(ctx(t), limiter.Request{Items: []limiter.Item{item("user_id", "over")}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Check(ctx(t), limiter.Request{Items: []limiter.Item{item("user_id", "ann")}, RefundOnReject: true}); err != nil {
		t.Errorf("an allowed check: %v", err)
	}
	both := []limiter.Item{item("user_id", "bob"), item("user_id", "over")}
	if _, err := c.Check(ctx(t), limiter.Request{Items: both, RefundOnReject: true}); !errors.Is(err, client.ErrNotGivenBack) {
		t.Errorf("a rejected check the limiter did not give back: got %v, want ErrNotGivenBack", err)
	}
	if resp, err := c.Check(ctx(t), limiter.Request{Items: both}); err != nil || resp.Allowed {
		t.Errorf("the same without RefundOnReject: %v, %s", err, describe(resp))
	}
}

// TestBatching: concurrent checks within the linger share RPCs, and each
// gets its own items' results.
func TestBatching(t *testing.T) {
	addr, n := serve(t, rulesYAML)
	c := newClient(t, client.Config{Addrs: []string{addr}, Linger: 50 * time.Millisecond, MaxBatch: 64, Timeout: 5 * time.Second})
	const callers = 100
	errs := checkConcurrently(t, c, callers, -1, limiter.Item{})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// 200 items in batches of at most 64: 4 RPCs when every caller comes
	// within one linger; a few more when the linger ends first.
	if got := n.rpcs.Load(); got < 4 || got > 10 {
		t.Errorf("got %d RPCs for %d checks of 2 items, want 4 to 10", got, callers)
	}
	if got := n.items.Load(); got != 2*callers {
		t.Errorf("got %d items sent, want %d", got, 2*callers)
	}
	if s := c.Stats(); s.Checks != callers || s.RPCs != uint64(n.rpcs.Load()) {
		t.Errorf("stats: got %+v, want %d checks and %d RPCs", s, callers, n.rpcs.Load())
	}
}

// TestBatchWithABadItem: a bad item fails its own check, not those it
// shared a batch with, whether the server finds it (a key too long) or
// the client does (not UTF-8, which cannot be encoded).
func TestBatchWithABadItem(t *testing.T) {
	huge := strings.Repeat("v", limiter.MaxValueLen)
	for _, tc := range []struct {
		name string
		bad  limiter.Item
	}{
		{"key too long, found by the server", item("a", huge, "b", huge, "c", huge, "d", huge, "e", huge)},
		{"value not UTF-8", item("user_id", "bad-\xff")},
		{"name not UTF-8", item("\xffuser_id", "bad")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := serve(t, rulesYAML)
			c := newClient(t, client.Config{Addrs: []string{addr}, Linger: 50 * time.Millisecond, Timeout: 5 * time.Second})
			if err := errors.Join(checkConcurrently(t, c, 10, 7, tc.bad)...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// checkConcurrently has callers check two items each of their own key at
// once (caller bad with badItem second) and returns what went wrong.
func checkConcurrently(t *testing.T, c *client.Client, callers, bad int, badItem limiter.Item) []error {
	var wg sync.WaitGroup
	errs := make([]error, callers)
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			req := limiter.Request{Items: []limiter.Item{item("user_id", fmt.Sprint(i)), item("user_id", fmt.Sprint(i))}}
			if i == bad {
				req.Items[1] = badItem
			}
			resp, err := c.Check(ctx(t), req)
			switch {
			case i == bad && !errors.Is(err, limiter.ErrInvalid):
				errs[i] = fmt.Errorf("caller %d: got %v, want ErrInvalid", i, err)
			case i == bad:
			case err != nil:
				errs[i] = fmt.Errorf("caller %d: %w", i, err)
			case len(resp.Items) != 2 || resp.Items[0].Results[0].Match.Key != fmt.Sprint(i) || resp.Items[1].Results[0].Remaining != 0:
				errs[i] = fmt.Errorf("caller %d: got %s, want its own two items", i, describe(resp))
			}
		})
	}
	close(start)
	wg.Wait()
	return errs
}

func TestRoundRobin(t *testing.T) {
	a, na := serve(t, rulesYAML)
	b, nb := serve(t, rulesYAML)
	c := newClient(t, client.Config{Addrs: []string{a, b}, Timeout: 5 * time.Second})
	check := func(i int) {
		t.Helper()
		if _, err := c.Check(ctx(t), limiter.Request{Items: []limiter.Item{item("user_id", fmt.Sprint(i))}}); err != nil {
			t.Fatal(err)
		}
	}
	// Until both connections are up, calls go to the one that is.
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; na.rpcs.Load() == 0 || nb.rpcs.Load() == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("got %d and %d RPCs after 10s, want both limiters used", na.rpcs.Load(), nb.rpcs.Load())
		}
		check(i)
	}
	ba, bb := na.rpcs.Load(), nb.rpcs.Load()
	for i := range 40 {
		check(i)
	}
	if da, db := na.rpcs.Load()-ba, nb.rpcs.Load()-bb; da < 18 || db < 18 {
		t.Errorf("got %d and %d of 40 RPCs, want them alternate", da, db)
	}
	// A limiter that is down is skipped: no check takes the policy.
	d := newClient(t, client.Config{Addrs: []string{deadpeer.Addr(t), a}, Timeout: 5 * time.Second, Policy: client.Policy{OnFailure: client.Fail}})
	for i := range 20 {
		if _, err := d.Check(ctx(t), limiter.Request{Items: []limiter.Item{item("user_id", fmt.Sprint(i))}}); err != nil {
			t.Fatalf("check %d with one limiter down: %v", i, err)
		}
	}
}

func TestTarget(t *testing.T) {
	addr, n := serve(t, rulesYAML)
	c := newClient(t, client.Config{Target: "dns:///" + addr, Timeout: 5 * time.Second})
	if _, err := c.Check(ctx(t), limiter.Request{Items: []limiter.Item{item("user_id", "a")}}); err != nil {
		t.Fatal(err)
	}
	if n.rpcs.Load() != 1 {
		t.Errorf("got %d RPCs, want 1", n.rpcs.Load())
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  client.Config
		want string // "" for valid
	}{
		{"addrs", client.Config{Addrs: []string{"a:1"}}, ""},
		{"target", client.Config{Target: "dns:///a:1"}, ""},
		{"neither", client.Config{}, "one of Addrs and Target"},
		{"both", client.Config{Addrs: []string{"a:1"}, Target: "dns:///a:1"}, "exclusive"},
		{"empty addr", client.Config{Addrs: []string{""}}, "Addrs[0] is empty"},
		{"negative timeout", client.Config{Addrs: []string{"a:1"}, Timeout: -1}, "must not be negative"},
		{"batch too large", client.Config{Addrs: []string{"a:1"}, MaxBatch: limiter.MaxItems + 1}, "MaxBatch"},
		{"local without limiter", client.Config{Addrs: []string{"a:1"}, Policy: client.Policy{OnFailure: client.Local}}, "needs Policy.Local"},
		{"unknown action", client.Config{Addrs: []string{"a:1"}, Policy: client.Policy{OnFailure: 9}}, "unknown failure action"},
	} {
		err := tc.cfg.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestCollector(t *testing.T) {
	c := newClient(t, client.Config{Addrs: []string{deadpeer.Addr(t)}, Timeout: 20 * time.Millisecond})
	for range 3 {
		if _, err := c.Check(ctx(t), limiter.Request{Items: []limiter.Item{item("user_id", "a")}}); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(c.Collector(prometheus.Labels{"limiter": "test"})); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() == "action" {
					name += "/" + l.GetValue()
				}
			}
			got[name] = m.GetCounter().GetValue()
		}
	}
	for name, want := range map[string]float64{
		"weir_client_checks_total": 3, "weir_client_rpcs_total": 3, "weir_client_rpc_errors_total": 3,
		"weir_client_fallbacks_total/allow": 3, "weir_client_fallbacks_total/reject": 0,
	} {
		if got[name] != want {
			t.Errorf("%s: got %v, want %v", name, got[name], want)
		}
	}
}

// TestClose: Checks in flight when the client closes, and Checks after,
// get ErrClosed.
func TestClose(t *testing.T) {
	for _, tc := range []struct {
		name   string
		linger time.Duration
	}{
		{"waiting in a batch", time.Hour},
		{"in an RPC of its own", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(client.Config{Addrs: []string{blackhole(t)}, Linger: tc.linger, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() {
				_, err := c.Check(ctx(t), limiter.Request{Items: []limiter.Item{item("user_id", "a")}})
				errc <- err
			}()
			// Wait until the check is in its batch, or its RPC is sent.
			for s := c.Stats(); s.Checks == 0 || (tc.linger == 0 && s.RPCs == 0); s = c.Stats() {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; !errors.Is(err, client.ErrClosed) {
				t.Errorf("check in flight: got %v, want ErrClosed", err)
			}
			if _, err := c.Check(ctx(t), limiter.Request{Items: []limiter.Item{item("user_id", "a")}}); !errors.Is(err, client.ErrClosed) {
				t.Errorf("check after Close: got %v, want ErrClosed", err)
			}
		})
	}
}
