package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/pkg/limiter"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Errors of the client; test with errors.Is. Errors the limiter answered
// also match the limiter's sentinels (limiter.ErrInvalid,
// limiter.ErrUnknownDomain, limiter.ErrNoRules) and carry the gRPC status
// (status.FromError).
var (
	// ErrUnavailable marks a check the limiter could not decide
	// (unreachable, too slow, or answering Unavailable), returned by
	// Policy Fail.
	ErrUnavailable = errors.New("client: limiter unavailable")
	// ErrClosed is returned by Checks after Close.
	ErrClosed = errors.New("client: closed")
	// ErrNotGivenBack is returned by a Check with
	// limiter.Request.RefundOnReject that the limiter rejected without
	// giving back what its allowed items took: a limiter older than
	// weir.v1's all_or_nothing, which it ignores. Those items' hits are
	// spent. Upgrade the limiters before the clients that use it.
	ErrNotGivenBack = errors.New("client: the limiter did not give back the allowed items' hits of a rejected RefundOnReject check (a limiter without weir.v1's all_or_nothing: upgrade it)")
)

// Client asks a limiter for decisions over gRPC. Safe for concurrent use;
// create it with New and release it with Close.
type Client struct {
	cfg   Config
	conn  *grpc.ClientConn
	api   weirv1.LimiterClient
	def   Site
	batch *batcher // nil without Linger
	rules ruleCache
	stats counters
	// base is the context of batched RPCs, which no caller owns;
	// cancelled by Close.
	base       context.Context
	cancelBase context.CancelFunc

	mu     sync.Mutex
	closed bool
}

// New returns a client for cfg. It dials in the background: New does not
// wait for a limiter to answer, and Checks made before one does take
// their failure policy.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	target := cfg.Target
	creds := cfg.Credentials
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	bo := backoff.DefaultConfig
	bo.BaseDelay = min(100*time.Millisecond, cfg.ReconnectMax)
	bo.MaxDelay = cfg.ReconnectMax
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: max(time.Second, cfg.Timeout)}),
	}
	if cfg.Keepalive > 0 {
		opts = append(opts, grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: cfg.Keepalive, Timeout: cfg.KeepaliveTimeout, PermitWithoutStream: true,
		}))
	}
	if len(cfg.Addrs) > 0 {
		// A resolver of this client's own: the list is the state it
		// reports, and nothing is registered globally.
		r := manual.NewBuilderWithScheme("weir-static")
		eps := make([]resolver.Endpoint, len(cfg.Addrs))
		for i, a := range cfg.Addrs {
			eps[i] = resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}}
		}
		r.InitialState(resolver.State{Endpoints: eps})
		opts = append(opts, grpc.WithResolvers(r))
		target = "weir-static:///limiters"
	}
	conn, err := grpc.NewClient(target, append(opts, cfg.DialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", target, err)
	}
	conn.Connect()
	c := &Client{cfg: cfg, conn: conn, api: weirv1.NewLimiterClient(conn)}
	c.base, c.cancelBase = context.WithCancel(context.Background())
	c.def = Site{c: c, p: cfg.Policy}
	if cfg.Linger > 0 {
		c.batch = newBatcher(c)
	}
	return c, nil
}

// Close fails the Checks in flight — waiting in a batch, in a batch's RPC
// or in an RPC of their own — with ErrClosed, and closes the connections.
// Checks after Close return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancelBase()
	if c.batch != nil {
		c.batch.close()
	}
	if err := c.conn.Close(); err != nil {
		return fmt.Errorf("client: close: %w", err)
	}
	return nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Check decides every item of req under Config.Policy; see Site.Check.
func (c *Client) Check(ctx context.Context, req limiter.Request) (limiter.Response, error) {
	return c.def.Check(ctx, req)
}

// Site returns a view of c with its own failure policy, for a call site
// that needs another than Config.Policy. Sites share c's connections,
// batches and counters; they need no closing.
func (c *Client) Site(p Policy) (*Site, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p.setDefaults()
	return &Site{c: c, p: p}, nil
}

// Site is a Client with a failure policy of its own. Safe for concurrent
// use.
type Site struct {
	c *Client
	p Policy
}

// Check decides every item of req, consuming quota for those allowed, as
// limiter.Limiter.Check does, but for what weir.v1 cannot carry, which is
// refused as invalid (limiter.ErrInvalid, naming the field) before
// anything is sent: Item.Exact, Item.CountRejected, Item.Match, Item.ZeroHits
// with Hits 0 (weir.v1's hits 0 means 1; with Hits above 0 ZeroHits
// changes nothing and is accepted), and a domain, attribute name or value
// that is not valid UTF-8 (the in-process limiter takes any bytes).
// Requests of more items than
// Config.MaxBatch are split over several RPCs, sent together; their items
// are independent, and when one RPC fails the others' quota is spent. A
// request with RefundOnReject (weir.v1's all_or_nothing) goes in one RPC
// of its own, never batched with other checks' items nor split: more
// than limiter.MaxItems items are refused as invalid.
//
// When the limiter cannot decide, the site's policy answers (the error is
// then nil, unless the policy is Fail). An invalid request, an unknown
// domain, and the caller's own cancellation or deadline are returned as
// errors. The results' Match.Rule carry only what weir.v1 says of a rule:
// its ID, window, shadow flag, retry advice and rejection message.
func (s *Site) Check(ctx context.Context, req limiter.Request) (limiter.Response, error) {
	c := s.c
	c.stats.checks.Add(1)
	c.stats.items.Add(uint64(len(req.Items)))
	if c.isClosed() {
		return limiter.Response{}, ErrClosed
	}
	if err := validDomain(req.Domain); err != nil {
		return limiter.Response{}, err
	}
	items, err := protoItems(req.Items)
	if err != nil {
		return limiter.Response{}, err
	}
	if req.RefundOnReject && len(items) > limiter.MaxItems {
		return limiter.Response{}, fmt.Errorf("client: %w: RefundOnReject with %d items: weir.v1 decides at most %d in one Check, and items of several cannot be given back together",
			limiter.ErrInvalid, len(items), limiter.MaxItems)
	}
	// A caller that gave up already gets its context's error and spends
	// nothing: gRPC sends nothing for it, and it must not join a batch,
	// which would be sent whatever its context.
	if ctx.Err() != nil {
		return limiter.Response{}, fmt.Errorf("client: check: %w", context.Cause(ctx))
	}
	// A deadline of the caller's that comes before the client's own is
	// the caller's to answer for, even when the server, which has it too,
	// reports it first.
	// (Batched RPCs do not carry the callers' deadlines.)
	// Items given back together go in one RPC of their own.
	batched := c.batch != nil && len(items) <= c.cfg.MaxBatch && !req.RefundOnReject
	dl, callerFirst := ctx.Deadline()
	callerFirst = callerFirst && !batched && !dl.After(time.Now().Add(c.cfg.Timeout))
	var results []*weirv1.ItemResult
	switch {
	case req.RefundOnReject:
		results, err = c.rpc(ctx, &weirv1.CheckRequest{Domain: req.Domain, Items: items, AllOrNothing: true})
	case batched:
		results, err = c.batch.check(ctx, req.Domain, items)
		if errors.Is(err, errAlone) {
			results, err = c.send(ctx, req.Domain, items)
		}
	default:
		results, err = c.send(ctx, req.Domain, items)
	}
	if err != nil {
		if callerFirst && status.Code(err) == codes.DeadlineExceeded {
			return limiter.Response{}, fmt.Errorf("client: check: %w", context.DeadlineExceeded)
		}
		return s.failed(ctx, req, err)
	}
	resp, err := c.response(req.Items, results)
	if err != nil {
		return s.failed(ctx, req, err)
	}
	if req.RefundOnReject && !givenBack(&resp) {
		return limiter.Response{}, ErrNotGivenBack
	}
	return resp, nil
}

// givenBack reports whether resp, the answer to a check with
// RefundOnReject, is what a limiter that honours it answers: allowed, or
// with every admission that spent (limiter.RuleResult.Spent) marked
// refunded.
func givenBack(resp *limiter.Response) bool {
	if resp.Allowed {
		return true
	}
	for i := range resp.Items {
		for _, r := range resp.Items[i].Results {
			if r.Spent() && !r.Refunded {
				return false
			}
		}
	}
	return true
}

// failed answers a check whose RPC failed with err: by the policy when the
// limiter could not decide, else with the error.
func (s *Site) failed(ctx context.Context, req limiter.Request, err error) (limiter.Response, error) {
	if errors.Is(err, ErrClosed) {
		return limiter.Response{}, err
	}
	if ctx.Err() != nil {
		return limiter.Response{}, fmt.Errorf("client: check: %w", context.Cause(ctx))
	}
	if status.Code(err) == codes.Canceled && s.c.isClosed() {
		// gRPC cancels the RPCs of a connection that closes ("the client
		// connection is closing"): an RPC of its own that Close cut
		// short, or one that began just after.
		return limiter.Response{}, ErrClosed
	}
	if !unavailable(err) {
		return limiter.Response{}, remoteError(err)
	}
	c := s.c
	c.stats.fallbacks[s.p.OnFailure].Add(1)
	switch s.p.OnFailure {
	case Reject:
		return c.reject(req, s.p.RetryAfter), nil
	case Local:
		resp, lerr := s.p.Local.Check(ctx, req)
		if lerr != nil {
			return limiter.Response{}, fmt.Errorf("client: local fallback (limiter unavailable: %v): %w", err, lerr)
		}
		return resp, nil
	case Fail:
		return limiter.Response{}, remoteError(err)
	}
	return allow(req), nil
}

// send sends items in RPCs of at most MaxBatch items, together, and
// returns their results in order.
func (c *Client) send(ctx context.Context, domain string, items []*weirv1.CheckItem) ([]*weirv1.ItemResult, error) {
	size := c.cfg.MaxBatch
	if len(items) <= size {
		return c.rpc(ctx, &weirv1.CheckRequest{Domain: domain, Items: items})
	}
	out := make([]*weirv1.ItemResult, len(items))
	errs := make([]error, (len(items)+size-1)/size)
	var wg sync.WaitGroup
	for i := 0; i < len(items); i += size {
		chunk := items[i:min(i+size, len(items))]
		wg.Go(func() {
			res, err := c.rpc(ctx, &weirv1.CheckRequest{Domain: domain, Items: chunk})
			if err != nil {
				errs[i/size] = err
				return
			}
			copy(out[i:], res)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rpc sends req, one weir.v1 Check, under Config.Timeout.
func (c *Client) rpc(ctx context.Context, req *weirv1.CheckRequest) ([]*weirv1.ItemResult, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	c.stats.rpcs.Add(1)
	resp, err := c.api.Check(ctx, req)
	if err != nil {
		c.stats.rpcErrors.Add(1)
		return nil, err
	}
	if len(resp.GetItems()) != len(req.GetItems()) {
		c.stats.rpcErrors.Add(1)
		return nil, fmt.Errorf("client: the limiter answered %d items for %d", len(resp.GetItems()), len(req.GetItems()))
	}
	return resp.GetItems(), nil
}

// unavailable reports whether err means the limiter could not decide.
func unavailable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}
