package usage

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/limiter"
)

// LimiterMeter is the Meter of a limiter process: it reads with
// Limiter.Status, a request of cost zero through the limiter's store, so
// the reading counts what every instance of the DC admitted. Its zero
// value reads nothing until SetLimiter; it is safe for concurrent use.
//
// A bucket's reading relies on the store settling the bucket's drain when
// it observes it (both stores do): a bucket left alone drains, when next
// touched, at the rate then in force — after a shrink, slower than before —
// so an unsettled reading could count less than the bucket will hold.
type LimiterMeter struct {
	// MinMemory: rules whose memory (algorithm.Params.Memory: the window,
	// two for the sliding counter, a full bucket's drain) is at most this
	// long go without readings — the coordinator keeps its quarantine for
	// them, exact for short memories (planner.Config.UsageAwareAbove), and
	// a reading would only cost a store call. 0: every rule.
	MinMemory time.Duration

	lim atomic.Pointer[limiter.Limiter]
}

var _ Meter = (*LimiterMeter)(nil)

// SetLimiter makes m read through l.
func (m *LimiterMeter) SetLimiter(l *limiter.Limiter) { m.lim.Store(l) }

// Consumed implements Meter. Only a decision of the store counts: a rule
// answered from a failure mode, disabled, overridden or unlimited has no
// reading.
func (m *LimiterMeter) Consumed(ctx context.Context, domain, ruleID, key string) (int64, bool) {
	l := m.lim.Load()
	if l == nil {
		return 0, false
	}
	set, err := l.Rules(domain)
	if err != nil || set == nil {
		return 0, false
	}
	r, ok := set.Rule(ruleID)
	if !ok || key == "" && len(r.Spec.KeyType) > 0 || r.Spec.Params(r.Spec.Limit, r.Spec.Burst).Memory() <= m.MinMemory {
		return 0, false
	}
	res, err := l.Status(ctx, domain, ruleID, key)
	if err != nil || res.Source != limiter.SourceStore {
		return 0, false
	}
	return algorithm.Consumed(res.Params(), res.Decision)
}
