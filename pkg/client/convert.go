package client

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// protoItems converts items to weir.v1, checked against the limits the
// limiter enforces and against what protobuf can encode (strings must be
// UTF-8): a bad item must fail its own Check with limiter.ErrInvalid, not
// a batch it shares with others, and not as an error the failure policy
// or a caller's OnError would let through.
func protoItems(items []limiter.Item) ([]*weirv1.CheckItem, error) {
	if len(items) == 0 {
		return nil, fmt.Errorf("client: %w: no items", limiter.ErrInvalid)
	}
	out := make([]*weirv1.CheckItem, len(items))
	msgs := make([]weirv1.CheckItem, len(items))
	for i := range items {
		it := &items[i]
		if err := validItem(it); err != nil {
			return nil, fmt.Errorf("client: item %d: %w", i, err)
		}
		msgs[i].Attributes, msgs[i].Hits = it.Attributes, it.Hits
		out[i] = &msgs[i]
	}
	return out, nil
}

func validItem(it *limiter.Item) error {
	switch {
	case it.Exact:
		return fmt.Errorf("%w: Exact is not carried by weir.v1", limiter.ErrInvalid)
	case it.ZeroHits && it.Hits == 0:
		// weir.v1's hits 0 means 1: sent, a check meant to spend nothing
		// would spend.
		return fmt.Errorf("%w: ZeroHits (a check that spends nothing) is not carried by weir.v1, whose hits 0 means 1", limiter.ErrInvalid)
	case it.CountRejected:
		return fmt.Errorf("%w: CountRejected is not carried by weir.v1", limiter.ErrInvalid)
	case it.Match.Rule != nil:
		return fmt.Errorf("%w: Match is not carried by weir.v1 (the limiter matches rules itself)", limiter.ErrInvalid)
	case len(it.Attributes) > limiter.MaxAttributes:
		return fmt.Errorf("%w: %d attributes, at most %d", limiter.ErrInvalid, len(it.Attributes), limiter.MaxAttributes)
	case it.Hits < 0 || it.Hits > limiter.MaxHits:
		return fmt.Errorf("%w: hits %d outside [0, %d]", limiter.ErrInvalid, it.Hits, limiter.MaxHits)
	}
	for k, v := range it.Attributes {
		if k == "" || len(k) > limiter.MaxNameLen {
			return fmt.Errorf("%w: attribute name of %d bytes (1 to %d)", limiter.ErrInvalid, len(k), limiter.MaxNameLen)
		}
		if len(v) > limiter.MaxValueLen {
			return fmt.Errorf("%w: attribute %q has a value of %d bytes, at most %d", limiter.ErrInvalid, k, len(v), limiter.MaxValueLen)
		}
		// weir.v1's strings are protobuf strings, which must be UTF-8:
		// such an item cannot even be encoded.
		if !utf8.ValidString(k) {
			return fmt.Errorf("%w: attribute name %q is not valid UTF-8", limiter.ErrInvalid, k)
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("%w: attribute %q has a value that is not valid UTF-8", limiter.ErrInvalid, k)
		}
	}
	return nil
}

// validDomain checks a domain against what weir.v1 can carry: UTF-8.
func validDomain(domain string) error {
	if !utf8.ValidString(domain) {
		return fmt.Errorf("client: %w: domain %q is not valid UTF-8", limiter.ErrInvalid, domain)
	}
	return nil
}

// response converts the results of items from weir.v1.
func (c *Client) response(items []limiter.Item, results []*weirv1.ItemResult) (limiter.Response, error) {
	n := 0
	for _, r := range results {
		n += len(r.GetResults())
	}
	all := make([]limiter.RuleResult, n)
	resp := limiter.Response{Allowed: true, Items: make([]limiter.ItemResult, len(results))}
	k := 0
	for i, pr := range results {
		hits := items[i].Hits
		if hits == 0 {
			hits = 1
		}
		prs := pr.GetResults()
		d := int(pr.GetDecisive())
		if d < -1 || d >= len(prs) {
			return limiter.Response{}, fmt.Errorf("client: the limiter answered item %d with decisive %d of %d results", i, d, len(prs))
		}
		it := &resp.Items[i]
		it.Allowed, it.Decisive = pr.GetAllowed(), d
		it.Results = all[k : k+len(prs) : k+len(prs)]
		k += len(prs)
		for j, r := range prs {
			it.Results[j] = limiter.RuleResult{
				Match: ruleset.Match{Rule: c.rules.get(r), Key: r.GetKey(), Limit: r.GetLimit()},
				Decision: algorithm.Decision{
					Allowed: r.GetAllowed(), Limit: r.GetLimit(), Remaining: r.GetRemaining(),
					ResetAt: r.GetResetAt().AsTime(), RetryAfter: r.GetRetryAfter().AsDuration(),
				},
				Source:   source(r.GetSource()),
				Hits:     hits,
				Refunded: r.GetRefunded(),
			}
		}
		resp.Allowed = resp.Allowed && it.Allowed
	}
	return resp, nil
}

func source(s weirv1.Source) limiter.Source {
	switch s {
	case weirv1.Source_SOURCE_STORE:
		return limiter.SourceStore
	case weirv1.Source_SOURCE_CACHE:
		return limiter.SourceCache
	case weirv1.Source_SOURCE_OVERRIDE_ALLOW:
		return limiter.SourceOverrideAllow
	case weirv1.Source_SOURCE_OVERRIDE_DENY:
		return limiter.SourceOverrideDeny
	case weirv1.Source_SOURCE_UNLIMITED:
		return limiter.SourceUnlimited
	case weirv1.Source_SOURCE_FAILURE_OPEN:
		return limiter.SourceFailureOpen
	case weirv1.Source_SOURCE_FAILURE_CLOSED:
		return limiter.SourceFailureClosed
	case weirv1.Source_SOURCE_FAILURE_LOCAL:
		return limiter.SourceFailureLocal
	}
	return 0
}

func advice(a weirv1.RetryAdvice) rule.RetryAdvice {
	switch a {
	case weirv1.RetryAdvice_RETRY_ADVICE_EXPONENTIAL_BACKOFF:
		return rule.ExponentialBackoff
	case weirv1.RetryAdvice_RETRY_ADVICE_DAILY_LIMIT_REACHED:
		return rule.DailyLimitReached
	}
	return rule.RetryAfter
}

// ruleKey is what weir.v1 says of a rule.
type ruleKey struct {
	id      string
	window  int64
	shadow  bool
	advice  weirv1.RetryAdvice
	message string
}

// maxRules bounds the rule cache: rules are few, but nothing a server
// answers may grow the client without bound.
const maxRules = 4096

// ruleCache keeps one ruleset.Rule per rule description, so that results
// share them rather than allocate one each. The zero value is empty.
type ruleCache struct {
	mu    sync.RWMutex
	rules map[ruleKey]*ruleset.Rule
}

func (rc *ruleCache) get(r *weirv1.RuleResult) *ruleset.Rule {
	k := ruleKey{r.GetRuleId(), r.GetWindowSeconds(), r.GetShadow(), r.GetRetryAdvice(), r.GetMessage()}
	rc.mu.RLock()
	rl, ok := rc.rules[k]
	rc.mu.RUnlock()
	if ok {
		return rl
	}
	rl = &ruleset.Rule{Spec: rule.Rule{
		ID: k.id, WindowSeconds: k.window, Shadow: k.shadow, RetryAdvice: advice(k.advice), RejectionMessage: k.message,
	}}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.rules == nil {
		rc.rules = make(map[ruleKey]*ruleset.Rule)
	}
	if len(rc.rules) < maxRules {
		rc.rules[k] = rl
	}
	return rl
}

// allow is Policy Allow's answer: every item allowed, no rule matched.
func allow(req limiter.Request) limiter.Response {
	resp := limiter.Response{Allowed: true, Items: make([]limiter.ItemResult, len(req.Items))}
	for i := range resp.Items {
		resp.Items[i] = limiter.ItemResult{Allowed: true, Decisive: -1}
	}
	return resp
}

// reject is Policy Reject's answer: every item rejected by the rule
// UnavailableRuleID, as a failure_mode closed rule rejects.
func (c *Client) reject(req limiter.Request, retryAfter time.Duration) limiter.Response {
	rl := &ruleset.Rule{Spec: rule.Rule{ID: UnavailableRuleID, RetryAdvice: rule.RetryAfter}}
	now := c.cfg.Now()
	resp := limiter.Response{Items: make([]limiter.ItemResult, len(req.Items))}
	all := make([]limiter.RuleResult, len(req.Items))
	for i := range resp.Items {
		hits := max(req.Items[i].Hits, 1)
		all[i] = limiter.RuleResult{
			Match:    ruleset.Match{Rule: rl},
			Decision: algorithm.Decision{ResetAt: now.Add(retryAfter), RetryAfter: retryAfter},
			Source:   limiter.SourceFailureClosed,
			Hits:     hits,
		}
		resp.Items[i] = limiter.ItemResult{Decisive: 0, Results: all[i : i+1 : i+1]}
	}
	return resp
}

// remoteErr is an error the limiter answered (or a failed RPC): it
// matches the sentinels it stands for and the gRPC status.
type remoteErr struct {
	msg string
	is  []error
}

func (e *remoteErr) Error() string   { return e.msg }
func (e *remoteErr) Unwrap() []error { return e.is }

// Reasons of the google.rpc.ErrorInfo the limiter attaches to its errors
// (internal/dc/grpcapi).
const (
	errorDomain         = "weir.v1"
	reasonUnknownDomain = "UNKNOWN_DOMAIN"
	reasonNoRules       = "NO_RULES"
	reasonUnavailable   = "STORE_UNAVAILABLE"
	reasonUnknownRule   = "UNKNOWN_RULE"
)

// remoteError maps err, from an RPC, to the client's and the limiter's
// sentinels.
func remoteError(err error) error {
	var re *remoteErr
	if errors.As(err, &re) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("client: check: %w", err)
	}
	reason := ""
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == errorDomain {
			reason = info.GetReason()
		}
	}
	e := &remoteErr{msg: "client: check: " + st.Code().String() + ": " + st.Message(), is: []error{err}}
	switch {
	case st.Code() == codes.InvalidArgument && reason == reasonUnknownDomain:
		e.is = append(e.is, limiter.ErrUnknownDomain)
	case st.Code() == codes.InvalidArgument:
		e.is = append(e.is, limiter.ErrInvalid)
	case st.Code() == codes.NotFound && reason == reasonUnknownRule:
		e.is = append(e.is, limiter.ErrUnknownRule)
	case unavailable(err):
		e.is = append(e.is, ErrUnavailable)
		switch reason {
		case reasonNoRules:
			e.is = append(e.is, limiter.ErrNoRules)
		case reasonUnavailable:
			e.is = append(e.is, limiter.ErrUnavailable)
		}
	}
	return e
}
