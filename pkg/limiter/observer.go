package limiter

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/pkg/breaker"
	"github.com/weirhq/weir/pkg/logthrottle"
)

// Observer is told what the limiter decides and meets. Implementations
// must be safe for concurrent use and fast: they run on the decision path.
type Observer interface {
	// Checked is called after every Check with its response and latency.
	Checked(domain string, resp *Response, latency time.Duration)
	// StoreCall is called after every store call with its latency and
	// error (nil on success; a request's own error counts as the call's).
	StoreCall(latency time.Duration, err error)
	// BreakerState is called when a store circuit breaker changes state:
	// the store's, or, on a store of several nodes (NodeLocator), any
	// node's when the Observer is not a NodeObserver.
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

// NodeBreakerState implements NodeObserver: those of o that are
// NodeObservers are told the node, the others only the state.
func (o Observers) NodeBreakerState(node string, s breaker.State) {
	for _, x := range o {
		if n, ok := x.(NodeObserver); ok {
			n.NodeBreakerState(node, s)
		} else {
			x.BreakerState(s)
		}
	}
}

// NodeForgotten implements NodeObserver for those of o that do.
func (o Observers) NodeForgotten(node string) {
	for _, x := range o {
		if n, ok := x.(NodeObserver); ok {
			n.NodeForgotten(node)
		}
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

// FallbackObserver is an Observer that is also told, per store call and
// node of the store (see NodeLocator; "" for a store that names none), how
// many rule decisions went to their failure modes and why. The limiter
// uses it when its Observer implements it.
type FallbackObserver interface {
	FellBack(node string, reason Fallback, decisions int)
}

// FellBack implements FallbackObserver for those of o that do.
func (o Observers) FellBack(node string, reason Fallback, decisions int) {
	for _, x := range o {
		if f, ok := x.(FallbackObserver); ok {
			f.FellBack(node, reason, decisions)
		}
	}
}

// fallbacks counts the decisions that went to failure modes, by reason,
// for the observer and for a log line written at most every
// fallbackLogEvery with the counts since the last one.
type fallbacks struct {
	observer FallbackObserver
	counts   [len(fallbackNames)]atomic.Int64
	lines    *logthrottle.Throttle // the log lines, every fallbackLogEvery
	// lastErr is the latest store error behind a fallback, for the log
	// line to name what the store answered (MOVED, CLUSTERDOWN, a refused
	// connection, ...), which the counts do not say.
	lastErr atomic.Pointer[storeError]
}

// storeError is a store call's error and the node it came from.
type storeError struct {
	node string
	err  error
}

const fallbackLogEvery = 10 * time.Second

// add counts n decisions of node that went to their failure modes for
// reason; err is the store's error behind it, if any.
func (f *fallbacks) add(l *Limiter, node string, reason Fallback, n int, err error) {
	if n <= 0 {
		return
	}
	if f.observer != nil {
		f.observer.FellBack(node, reason, n)
	}
	f.counts[reason].Add(int64(n))
	if err != nil {
		f.lastErr.Store(&storeError{node, err})
	}
	// The counts say what the lines held back did.
	if _, ok := f.lines.Allow(); !ok {
		return
	}
	attrs := make([]any, 0, 2*len(Fallbacks)+2)
	for _, r := range Fallbacks {
		if c := f.counts[r].Swap(0); c > 0 {
			attrs = append(attrs, r.String(), c)
		}
	}
	attrs = append(attrs, "store_timeout", l.StoreTimeout())
	if e := f.lastErr.Swap(nil); e != nil {
		attrs = append(attrs, "last_error", e.err.Error(), "last_error_node", e.node)
	}
	l.log.Warn("rule decisions went to their failure modes instead of the store (counts since the last such line, at most one every 10s)", attrs...)
}
