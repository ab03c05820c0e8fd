package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/logthrottle"
)

// Checker decides requests. *limiter.Limiter is one; pkg/client's Client,
// a client of a remote limiter, is another.
type Checker interface {
	Check(ctx context.Context, req limiter.Request) (limiter.Response, error)
}

// OnError says what happens to a request the checker could not decide (no
// rules loaded yet, an unknown domain, a remote checker out of reach, or
// a deadline on the request's context that passed during the check). A
// request whose context was cancelled — its client went away — is
// answered nothing, and not passed on.
// Requests that are themselves bad — a header value too large to be an
// attribute, a path or header value that is not valid UTF-8 — are
// answered 400 whatever this says.
type OnError int

const (
	// Allow passes the request on, logged and counted (the default: rate
	// limiting must not take a service down with it).
	Allow OnError = iota
	// Reject answers 503 Service Unavailable.
	Reject
)

// Config configures a Middleware. Checker is required.
type Config struct {
	Checker Checker
	// Domain is the rule domain; empty when the checker has one.
	Domain string
	// Headers maps request header names to attribute names, for example
	// {"X-User-Id": "user_id", "X-Api-Key": "api_key"}. A header that is
	// absent gives no attribute (rules that need it do not apply).
	Headers map[string]string
	// TrustedProxies are the peers whose X-Forwarded-For is believed: the
	// client IP is then the rightmost address in it that is not itself a
	// trusted proxy. From any other peer, the peer's address is the client
	// IP and X-Forwarded-For is ignored (clients can write anything there).
	TrustedProxies []netip.Prefix
	// OnError: Allow (default) or Reject.
	OnError OnError
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock for relative header fields; use the checker's.
	// Default time.Now.
	Now func() time.Time
}

// Middleware checks requests before its handler sees them. Safe for
// concurrent use.
type Middleware struct {
	cfg     Config
	headers []headerAttr
	// failures rate-limits the log of failed checks: while the limiter
	// cannot decide, every request fails.
	failures *logthrottle.Throttle
}

// failureLogEvery is the least time between two log lines of failed
// checks; each says how many failed since the last.
const failureLogEvery = 10 * time.Second

type headerAttr struct{ header, attr string }

// Attribute names the middleware sets itself.
const (
	AttrIP     = "ip"
	AttrPath   = "path"
	AttrMethod = "method"
	AttrHost   = "host"
)

// New returns a Middleware for cfg.
func New(cfg Config) (*Middleware, error) {
	if cfg.Checker == nil {
		return nil, errors.New("httplimit: Config.Checker is required")
	}
	if cfg.OnError != Allow && cfg.OnError != Reject {
		return nil, fmt.Errorf("httplimit: unknown OnError %d", cfg.OnError)
	}
	if len(cfg.Headers) > limiter.MaxAttributes-4 {
		return nil, fmt.Errorf("httplimit: %d header attributes, at most %d", len(cfg.Headers), limiter.MaxAttributes-4)
	}
	m := &Middleware{cfg: cfg}
	for h, a := range cfg.Headers {
		switch {
		case h == "" || a == "" || len(a) > limiter.MaxNameLen:
			return nil, fmt.Errorf("httplimit: header %q to attribute %q: both must be non-empty, the attribute at most %d bytes", h, a, limiter.MaxNameLen)
		case a == AttrIP || a == AttrPath || a == AttrMethod || a == AttrHost:
			return nil, fmt.Errorf("httplimit: header %q to attribute %q: the middleware sets %q itself", h, a, a)
		}
		m.headers = append(m.headers, headerAttr{http.CanonicalHeaderKey(h), a})
	}
	for _, p := range cfg.TrustedProxies {
		if !p.IsValid() {
			return nil, errors.New("httplimit: invalid trusted proxy prefix")
		}
	}
	if m.cfg.Logger == nil {
		m.cfg.Logger = slog.Default()
	}
	if m.cfg.Now == nil {
		m.cfg.Now = time.Now
	}
	m.failures = logthrottle.New(failureLogEvery, m.cfg.Now)
	return m, nil
}

// Wrap returns next behind the middleware.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.allow(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// allow checks r and reports whether it may go on; when not, it has
// answered w.
func (m *Middleware) allow(w http.ResponseWriter, r *http.Request) bool {
	it, err := m.Item(r)
	if err != nil {
		WriteJSON(w, http.StatusBadRequest, errorBody{Error: "INVALID_REQUEST", Message: err.Error()})
		return false
	}
	resp, err := m.cfg.Checker.Check(r.Context(), limiter.Request{Domain: m.cfg.Domain, Items: []limiter.Item{it}})
	switch {
	case errors.Is(err, limiter.ErrInvalid):
		WriteJSON(w, http.StatusBadRequest, errorBody{Error: "INVALID_REQUEST", Message: err.Error()})
		return false
	case err != nil && errors.Is(r.Context().Err(), context.Canceled):
		// The request was cancelled: its client went away (or its
		// connection is being closed). No one reads an answer, so none is
		// written and the handler is not called. A request whose context
		// reached its deadline (a timeout set by a middleware in front)
		// is another matter: its client still waits, and the request
		// could not be checked, so OnError answers it below.
		return false
	case err != nil:
		if held, ok := m.failures.Allow(); ok {
			m.cfg.Logger.Warn("rate limit check failed", "err", err, "on_error", m.cfg.OnError.String(), logthrottle.Held(held))
		}
		if m.cfg.OnError == Allow {
			return true
		}
		WriteJSON(w, http.StatusServiceUnavailable, errorBody{Error: "UNAVAILABLE", Message: "rate limit check failed"})
		return false
	case len(resp.Items) != 1:
		if held, ok := m.failures.Allow(); ok {
			m.cfg.Logger.Error("rate limit check answered the wrong number of items", "items", len(resp.Items), logthrottle.Held(held))
		}
		if m.cfg.OnError == Allow {
			return true
		}
		WriteJSON(w, http.StatusServiceUnavailable, errorBody{Error: "UNAVAILABLE", Message: "rate limit check failed"})
		return false
	}
	item := &resp.Items[0]
	if item.Decisive < 0 {
		return true // no enforcing rule matched
	}
	d := &item.Results[item.Decisive]
	SetHeaders(w.Header(), item, d, m.cfg.Now())
	if item.Allowed {
		return true
	}
	rej := Rejected(d)
	if rej.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(rej.RetryAfter, 10))
	}
	WriteJSON(w, rej.Status, rejection{Error: rej.Error, Message: rej.Message, RetryAfter: rej.RetryAfter})
	return false
}

// Item describes r as a limiter item: ip, path, method, host, and the
// configured headers. It fails only for a value that cannot be an
// attribute: longer than an attribute may be, or not valid UTF-8 (a path
// such as /%FF, once its escapes are read, or a header holding bytes
// 0x80-0xFF that are not UTF-8). Attributes must be UTF-8 to cross
// weir.v1, so a remote checker could not decide such a request; the
// middleware refuses it whatever the checker, so that in-process and
// remote checkers answer alike and no such request is passed on
// unchecked.
func (m *Middleware) Item(r *http.Request) (limiter.Item, error) {
	attrs := make(map[string]string, 4+len(m.headers))
	if ip := m.clientIP(r); ip.IsValid() {
		attrs[AttrIP] = ip.String()
	}
	attrs[AttrPath] = r.URL.Path
	attrs[AttrMethod] = r.Method
	if r.Host != "" {
		attrs[AttrHost] = r.Host
	}
	for _, h := range m.headers {
		v := r.Header.Values(h.header)
		if len(v) == 0 {
			continue
		}
		val := strings.Join(v, ",")
		if len(val) > limiter.MaxValueLen {
			return limiter.Item{}, fmt.Errorf("header %s of %d bytes, at most %d", h.header, len(val), limiter.MaxValueLen)
		}
		attrs[h.attr] = val
	}
	if len(attrs[AttrPath]) > limiter.MaxValueLen {
		return limiter.Item{}, fmt.Errorf("path of %d bytes, at most %d", len(attrs[AttrPath]), limiter.MaxValueLen)
	}
	if len(attrs[AttrHost]) > limiter.MaxValueLen {
		return limiter.Item{}, fmt.Errorf("host of %d bytes, at most %d", len(attrs[AttrHost]), limiter.MaxValueLen)
	}
	for a, v := range attrs {
		if !utf8.ValidString(v) {
			return limiter.Item{}, fmt.Errorf("%s is not valid UTF-8", m.source(a))
		}
	}
	return limiter.Item{Attributes: attrs}, nil
}

// source names where the attribute a comes from, for messages.
func (m *Middleware) source(a string) string {
	for _, h := range m.headers {
		if h.attr == a {
			return "header " + h.header
		}
	}
	return a
}

// clientIP returns the peer's address, or, from a trusted proxy, the
// rightmost untrusted address of X-Forwarded-For. Invalid when the peer's
// address is not an IP (a Unix socket, a test request).
func (m *Middleware) clientIP(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	peer = peer.Unmap()
	if !m.trusted(peer) {
		return peer
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		parts := strings.Split(hops[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				return peer // a malformed hop: trust nothing before it
			}
			if a = a.Unmap(); !m.trusted(a) {
				return a
			}
		}
	}
	return peer
}

func (m *Middleware) trusted(a netip.Addr) bool {
	for _, p := range m.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// String names the policy as the flag does.
func (o OnError) String() string {
	if o == Reject {
		return "reject"
	}
	return "allow"
}

// ParseOnError parses "allow" or "reject".
func ParseOnError(s string) (OnError, error) {
	switch s {
	case "allow":
		return Allow, nil
	case "reject":
		return Reject, nil
	}
	return 0, fmt.Errorf("httplimit: on-error %q, want allow or reject", s)
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

type rejection struct {
	Error      string `json:"error"`
	Message    string `json:"message"`
	RetryAfter int64  `json:"retry_after,omitempty"`
}

// WriteJSON answers code with v as JSON, HTML characters unescaped; the
// limiter's HTTP API writes its bodies with it too.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// SetHeaders writes the X-RateLimit-* fields of the decisive rule d and
// the IETF RateLimit-Policy (every enforcing rule of item with a known
// quota) and RateLimit (d) fields, relative times from now. Shadow rules
// only observe and never show. A result without a limit (an unlimited
// rule, an allow or deny override: limiter.RuleResult.Limited) has
// nothing to report: nothing is written for it, since a Limit and
// Remaining of 0 would tell clients to stop. Nor has a result of
// limiter.SourceFailureClosed (a rule's failure_mode closed while the
// store failed, or pkg/client's Policy Reject while the limiter could not
// be reached): the key's quota is unknown, and that rejection's only
// advice is its Retry-After, which the caller writes (see Rejected).
func SetHeaders(h http.Header, item *limiter.ItemResult, d *limiter.RuleResult, now time.Time) {
	if !quotaKnown(d) {
		return
	}
	h.Set("X-RateLimit-Limit", strconv.FormatInt(d.Limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(d.Remaining, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(int64(math.Ceil(float64(d.ResetAt.UnixMilli())/1000)), 10))
	var policies []string
	for i := range item.Results {
		if r := &item.Results[i]; quotaKnown(r) && !r.Shadow() {
			policies = append(policies, fmt.Sprintf("%q;q=%d;w=%d", r.Match.Rule.Spec.ID, r.Limit, r.Match.Rule.Spec.WindowSeconds))
		}
	}
	if len(policies) > 0 {
		h.Set("RateLimit-Policy", strings.Join(policies, ", "))
		h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", d.Match.Rule.Spec.ID, d.Remaining, CeilSeconds(d.ResetAt.Sub(now))))
	}
}

// quotaKnown reports whether r says how much of a limit its key has
// left: a limited result not made up by a failure mode that rejects.
func quotaKnown(r *limiter.RuleResult) bool {
	return r.Limited() && r.Source != limiter.SourceFailureClosed
}

// CeilSeconds rounds d up to whole seconds; 0 for d ≤ 0.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}

// RetryAfterSeconds is the Retry-After of a rejection by d: at least 1.
func RetryAfterSeconds(d *limiter.RuleResult) int64 { return max(1, CeilSeconds(d.RetryAfter)) }

// Rejection is how an HTTP server answers a request its decisive result
// rejected.
type Rejection struct {
	// Status is 429 Too Many Requests for a limit (a failure_mode closed
	// rejection included: it asks the client to come back after
	// RetryAfter), 403 Forbidden for a deny override.
	Status int
	// Error is RATE_LIMIT_EXCEEDED or RATE_LIMIT_DENIED.
	Error string
	// Message tells the client what happened and what to do.
	Message string
	// RetryAfter is the Retry-After in seconds, at least 1 for a limit; 0
	// for a deny, which is for good: no retry is promised.
	RetryAfter int64
}

// Rejected returns the answer to a request rejected by d.
func Rejected(d *limiter.RuleResult) Rejection {
	if d.Source == limiter.SourceOverrideDeny {
		return Rejection{
			Status: http.StatusForbidden, Error: "RATE_LIMIT_DENIED",
			Message: fmt.Sprintf("Access denied: rule %q denies this key.", d.Match.Rule.Spec.ID),
		}
	}
	return Rejection{
		Status: http.StatusTooManyRequests, Error: "RATE_LIMIT_EXCEEDED",
		Message: RejectionMessage(d), RetryAfter: RetryAfterSeconds(d),
	}
}

// RejectionMessage is the message of a rejection by d, a limit: the
// rule's own, or one following its retry advice.
func RejectionMessage(d *limiter.RuleResult) string {
	if m := d.Match.Rule.Spec.RejectionMessage; m != "" {
		return m
	}
	secs := seconds(RetryAfterSeconds(d))
	switch d.Match.Rule.Spec.RetryAdvice {
	case "exponential_backoff":
		return "Rate limit exceeded. Retry with exponential backoff, starting at " + secs + "."
	case "daily_limit_reached":
		return "Daily limit reached. Try again after the limit resets."
	}
	return "Rate limit exceeded. Please try again in " + secs + "."
}

// seconds says n seconds in English: "1 second", "2 seconds".
func seconds(n int64) string {
	if n == 1 {
		return "1 second"
	}
	return strconv.FormatInt(n, 10) + " seconds"
}
