package limiter

import (
	"sync"
	"sync/atomic"
	"time"
)

// adaptiveTimeout is the bound on store calls, derived from the latencies
// the store has been answering with, so that a store that is slow because
// it is busy (its calls queue behind each other) is waited for, and one
// that stopped answering is not. It is TCP's retransmission timeout
// (RFC 6298) over store calls: smoothed latency srtt and mean deviation
// rttvar, updated with each call that succeeded (gains 1/8 and 1/4), and
// the bound srtt + 4·rttvar, at least floor. Each timeout of a call
// started after the last doubling doubles the bound (up to the ceiling)
// until a call succeeds again: one stall shared by concurrent
// calls doubles it once. Timeouts are not latencies (the call's real
// latency is unknown) and do not feed srtt. Safe for concurrent use; the
// bound in force is read without a lock.
type adaptiveTimeout struct {
	floor, ceiling time.Duration

	mu          sync.Mutex
	srtt        time.Duration
	rttvar      time.Duration
	seen        bool
	backoff     uint8     // doublings since the last success
	lastBackoff time.Time // when the bound was last doubled

	cur atomic.Int64 // the bound in force, ns
}

func newAdaptiveTimeout(floor, ceiling time.Duration) *adaptiveTimeout {
	a := &adaptiveTimeout{floor: floor, ceiling: max(floor, ceiling)}
	a.cur.Store(int64(floor))
	return a
}

// bound returns the timeout in force for a call made now.
func (a *adaptiveTimeout) bound() time.Duration { return time.Duration(a.cur.Load()) }

// observe records the latency of a call that succeeded.
func (a *adaptiveTimeout) observe(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.seen {
		a.srtt, a.rttvar, a.seen = d, d/2, true
	} else {
		dev := a.srtt - d
		if dev < 0 {
			dev = -dev
		}
		a.rttvar += (dev - a.rttvar) / 4
		a.srtt += (d - a.srtt) / 8
	}
	a.backoff = 0
	a.set()
}

// timedOut records a call started at start that timed out at now.
func (a *adaptiveTimeout) timedOut(start, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if start.Before(a.lastBackoff) || a.backoff >= 16 {
		return
	}
	a.backoff++
	a.lastBackoff = now
	a.set()
}

func (a *adaptiveTimeout) set() {
	b := max(a.srtt+4*a.rttvar, a.floor) << a.backoff
	if b <= 0 || b > a.ceiling { // b <= 0: the shift overflowed
		b = a.ceiling
	}
	a.cur.Store(int64(max(b, a.floor)))
}
