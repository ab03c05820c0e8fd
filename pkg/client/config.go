package client

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/weirhq/weir/pkg/limiter"
)

// Defaults of Config's zero values.
const (
	DefaultTimeout          = 50 * time.Millisecond
	DefaultKeepalive        = 30 * time.Second
	DefaultKeepaliveTimeout = 5 * time.Second
	DefaultReconnectMax     = 2 * time.Second
	DefaultRetryAfter       = time.Second
)

// Config configures a Client. Exactly one of Addrs and Target is
// required; every other field's zero value takes the default its comment
// states.
type Config struct {
	// Addrs are limiter gRPC addresses (host:port). Calls are spread over
	// them round-robin; an address that is down is skipped until it
	// answers again.
	Addrs []string
	// Target names the limiters as a gRPC target instead of Addrs, for
	// example "dns:///limiter.weir.svc:9090": calls are spread round-robin
	// over every address the name resolves to, re-resolved as they change.
	Target string
	// Credentials secure the connections. Default: none (plaintext), as
	// between a service and the limiter of its own DC on a private
	// network.
	Credentials credentials.TransportCredentials
	// DialOptions are added after the client's own (interceptors, stats
	// handlers, a custom dialer). Default none.
	DialOptions []grpc.DialOption
	// Timeout bounds each weir.v1 Check RPC; a Check whose answer does not
	// come in time takes its failure policy. The caller's context can only
	// shorten it. Default 50ms.
	Timeout time.Duration
	// Linger, when positive, turns batching on: a Check waits up to Linger
	// for other Checks of the same domain, and they share one RPC. Default
	// 0: every Check sends its own RPC at once.
	Linger time.Duration
	// MaxBatch is the most items one RPC carries: larger requests and
	// batches are split. Default and maximum limiter.MaxItems, the
	// server's limit. A batch is also sent before its request would pass
	// 4 MiB, the limiter's limit on a request's size, so that callers
	// whose items each fit never fail together.
	MaxBatch int
	// Keepalive is how long a connection may be idle before it is pinged,
	// so that a limiter that died is noticed before the next call needs
	// it; negative disables pings. Default 30s. The server must permit it
	// (the limiter does; grpc-go's default policy closes connections
	// pinged more often than every 5 minutes).
	Keepalive time.Duration
	// KeepaliveTimeout is how long a ping may go unanswered before the
	// connection is closed. Default 5s.
	KeepaliveTimeout time.Duration
	// ReconnectMax caps the backoff between attempts to reach a limiter
	// that is down. Default 2s.
	ReconnectMax time.Duration
	// Policy is the failure policy of Client.Check, and the default of
	// sites. Default: allow.
	Policy Policy
	// Now is the clock of the decisions the client makes itself (a
	// rejection by Policy Reject). Default time.Now.
	Now func() time.Time
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	var errs []error
	switch {
	case len(c.Addrs) == 0 && c.Target == "":
		errs = append(errs, errors.New("need one of Addrs and Target"))
	case len(c.Addrs) > 0 && c.Target != "":
		errs = append(errs, errors.New("both Addrs and Target set; they are exclusive"))
	}
	for i, a := range c.Addrs {
		if a == "" {
			errs = append(errs, fmt.Errorf("empty address: Addrs[%d] is empty", i))
		}
	}
	if c.Timeout < 0 || c.Linger < 0 || c.KeepaliveTimeout < 0 || c.ReconnectMax < 0 {
		errs = append(errs, errors.New("negative duration: Timeout, Linger, KeepaliveTimeout and ReconnectMax must not be negative"))
	}
	if c.MaxBatch < 0 || c.MaxBatch > limiter.MaxItems {
		errs = append(errs, fmt.Errorf("MaxBatch %d outside [0, %d]", c.MaxBatch, limiter.MaxItems))
	}
	if err := c.Policy.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("client: invalid config: %w", err)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = limiter.MaxItems
	}
	if c.Keepalive == 0 {
		c.Keepalive = DefaultKeepalive
	}
	if c.KeepaliveTimeout == 0 {
		c.KeepaliveTimeout = DefaultKeepaliveTimeout
	}
	if c.ReconnectMax == 0 {
		c.ReconnectMax = DefaultReconnectMax
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Policy.setDefaults()
}

// Action is what a Check does when the limiter cannot decide.
type Action uint8

// The actions.
const (
	// Allow answers every item allowed, with no rule matched (Decisive
	// -1): the service goes on as if unlimited. The default: rate
	// limiting must not take a service down with it.
	Allow Action = iota
	// Reject answers every item rejected by the rule UnavailableRuleID,
	// Source limiter.SourceFailureClosed, retry after Policy.RetryAfter.
	// The rule has no limit and no window, and the results none either:
	// httplimit answers 429 with Retry-After and no quota fields.
	Reject
	// Local has Policy.Local decide.
	Local
	// Fail returns the error, which wraps ErrUnavailable: the caller
	// decides (httplimit's OnError, grpclimit's OnError).
	Fail
)

var actionNames = [...]string{Allow: "allow", Reject: "reject", Local: "local", Fail: "fail"}

// String names the action as metrics label it.
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// UnavailableRuleID is the rule ID of the rejections made by Policy
// Reject.
const UnavailableRuleID = "weir-unavailable"

// Policy is a failure policy: what a Check answers when the limiter is
// unreachable, does not answer within Config.Timeout, or answers
// Unavailable (a limiter without rules, or shutting down). Other errors —
// an invalid request, an unknown domain — are returned whatever the
// policy. The zero value allows.
type Policy struct {
	// OnFailure is the action. Default Allow.
	OnFailure Action
	// Local decides for Action Local: an in-process limiter, usually over
	// an in-memory store (memstore) with rules at conservative limits — a
	// fraction of the global limit, since every instance of the service
	// decides alone. Required for Local; its errors are returned.
	Local *limiter.Limiter
	// RetryAfter is the retry delay of a rejection by Action Reject.
	// Default 1s.
	RetryAfter time.Duration
}

// Validate reports whether p is usable.
func (p Policy) Validate() error {
	switch {
	case p.OnFailure > Fail:
		return fmt.Errorf("client: unknown failure action %d", p.OnFailure)
	case p.OnFailure == Local && p.Local == nil:
		return errors.New("client: failure action local needs Policy.Local")
	case p.RetryAfter < 0:
		return fmt.Errorf("client: negative RetryAfter %v", p.RetryAfter)
	}
	return nil
}

func (p *Policy) setDefaults() {
	if p.RetryAfter == 0 {
		p.RetryAfter = DefaultRetryAfter
	}
}
