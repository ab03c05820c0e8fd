package limiter

import (
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
