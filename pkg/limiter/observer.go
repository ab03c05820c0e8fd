package limiter

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/pkg/breaker"
)

// Observer is told what the limiter decides and meets. Implementations
// must be safe for concurrent use and fast: they run on the decision path.
type Observer interface {
	// Checked is called after every Check with its response and latency.
	Checked(domain string, resp *Response, latency time.Duration)
	// StoreCall is called after every store call with its latency and
	// error (nil on success; a request's own error counts as the call's).
	StoreCall(latency time.Duration, err error)
	// BreakerState is called when the store's circuit breaker changes state.
	BreakerState(s breaker.State)
}

type nopObserver struct{}

func (nopObserver) Checked(string, *Response, time.Duration) {}
func (nopObserver) StoreCall(time.Duration, error)           {}
func (nopObserver) BreakerState(breaker.State)               {}

// Observers fans calls out to several observers.
type Observers []Observer

// Checked implements Observer.
func (o Observers) Checked(domain string, resp *Response, latency time.Duration) {
	for _, x := range o {
		x.Checked(domain, resp, latency)
	}
}

// StoreCall implements Observer.
func (o Observers) StoreCall(latency time.Duration, err error) {
	for _, x := range o {
		x.StoreCall(latency, err)
	}
}

// BreakerState implements Observer.
func (o Observers) BreakerState(s breaker.State) {
	for _, x := range o {
		x.BreakerState(s)
	}
}

// Fallback says why rule decisions that should have been the store's
// went to their rules' failure modes.
type Fallback uint8

// The reasons.
const (
	// FallbackBreakerOpen: the store's circuit breaker was open.
	FallbackBreakerOpen Fallback = iota + 1
	// FallbackTimeout: the store call outlasted the adaptive timeout.
	FallbackTimeout
	// FallbackError: the store call failed (connection, reply).
	FallbackError
	// FallbackShed: the store requests in flight were at their bound
	// (Config.MaxInFlight) for longer than Config.AdmitWait; the store
	// was not asked, and nothing is held against it.
	FallbackShed
)

var fallbackNames = [...]string{FallbackBreakerOpen: "breaker_open", FallbackTimeout: "timeout", FallbackError: "error", FallbackShed: "shed"}

// Fallbacks lists every reason, in order.
var Fallbacks = []Fallback{FallbackBreakerOpen, FallbackTimeout, FallbackError, FallbackShed}

func (f Fallback) String() string {
	if int(f) < len(fallbackNames) && fallbackNames[f] != "" {
		return fallbackNames[f]
	}
	return "Fallback(" + strconv.Itoa(int(f)) + ")"
}

// FallbackObserver is an Observer that is also told, per store call, how
// many rule decisions went to their failure modes and why. The limiter
// uses it when its Observer implements it.
type FallbackObserver interface {
	FellBack(reason Fallback, decisions int)
}

// FellBack implements FallbackObserver for those of o that do.
func (o Observers) FellBack(reason Fallback, decisions int) {
	for _, x := range o {
		if f, ok := x.(FallbackObserver); ok {
			f.FellBack(reason, decisions)
		}
	}
}

// fallbacks counts the decisions that went to failure modes, by reason,
// for the observer and for a log line written at most every
// fallbackLogEvery with the counts since the last one.
type fallbacks struct {
	observer FallbackObserver
	counts   [len(fallbackNames)]atomic.Int64
	lastLog  atomic.Int64 // Unix ns
}

const fallbackLogEvery = 10 * time.Second

func (f *fallbacks) add(l *Limiter, reason Fallback, n int) {
	if n <= 0 {
		return
	}
	if f.observer != nil {
		f.observer.FellBack(reason, n)
	}
	f.counts[reason].Add(int64(n))
	now := l.now().UnixNano()
	last := f.lastLog.Load()
	if now-last < int64(fallbackLogEvery) || !f.lastLog.CompareAndSwap(last, now) {
		return
	}
	attrs := make([]any, 0, 2*len(Fallbacks)+2)
	for _, r := range Fallbacks {
		if c := f.counts[r].Swap(0); c > 0 {
			attrs = append(attrs, r.String(), c)
		}
	}
	attrs = append(attrs, "store_timeout", l.timeout.bound())
	l.log.Warn("rule decisions went to their failure modes instead of the store (counts since the last such line, at most one every 10s)", attrs...)
}
