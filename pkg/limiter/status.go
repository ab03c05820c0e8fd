package limiter

import (
	"context"
	"errors"
	"fmt"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
)

// ErrUnavailable marks a status request the store could not answer.
var ErrUnavailable = errors.New("limiter: store unavailable")

// Status returns the quota key has left under the rule, consuming nothing.
// key is the rule's key value (see ruleset.Match.Key). A disabled rule
// answers SourceDisabled, an override or unlimited rule its Source, none
// of them a limit (RuleResult.Limited). When the store is down, a
// failure_mode local rule answers from memory; other rules return
// ErrUnavailable.
func (l *Limiter) Status(ctx context.Context, domain, ruleID, key string) (RuleResult, error) {
	set, err := l.Rules(domain)
	if err != nil {
		return RuleResult{}, err
	}
	if set == nil {
		return RuleResult{}, fmt.Errorf("%w %q: domain %q holds no rule", ErrUnknownRule, ruleID, domain)
	}
	r, ok := set.Rule(ruleID)
	if !ok {
		return RuleResult{}, fmt.Errorf("%w %q in domain %q", ErrUnknownRule, ruleID, set.Domain())
	}
	m, err := r.KeyFor(key)
	if err != nil {
		return RuleResult{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	now := l.now()
	res := RuleResult{Match: m}
	switch {
	case !r.Spec.Enabled:
		res.Source, res.Decision = SourceDisabled, algorithm.Decision{Allowed: true, ResetAt: now}
		return res, nil
	case m.Action == rule.ActionDeny:
		res.Source, res.Decision = SourceOverrideDeny, algorithm.Decision{ResetAt: now}
		return res, nil
	case m.Action == rule.ActionAllow:
		res.Source, res.Decision = SourceOverrideAllow, algorithm.Decision{Allowed: true, ResetAt: now}
		return res, nil
	case m.Unlimited:
		res.Source, res.Decision = SourceUnlimited, algorithm.Decision{Allowed: true, ResetAt: now}
		return res, nil
	}
	req := algorithm.Request{Key: m.StoreKey, Params: l.params(set.Domain(), m)}
	out, err := l.storeCall(ctx, now, []algorithm.Request{req})
	if err == nil && out[0].Err == nil {
		res.Source, res.Decision, res.req = SourceStore, out[0].Decision, req
		return res, nil
	}
	if err == nil {
		err = out[0].Err
	}
	if r.Spec.FailureMode != rule.FailLocal {
		return RuleResult{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	out, _ = l.local.Decide(ctx, now, []algorithm.Request{req})
	if out[0].Err != nil {
		return RuleResult{}, fmt.Errorf("%w: %w", ErrInvalid, out[0].Err)
	}
	res.Source, res.Decision = SourceFailureLocal, out[0].Decision
	return res, nil
}
