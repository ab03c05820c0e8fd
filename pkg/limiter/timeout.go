package limiter

import (
	"sync"
	"sync/atomic"
	"time"
)

// adaptiveTimeout is the bound on store calls, derived from the latencies
// the store has been answering with, so that a store that is slow because
// it is busy (its calls queue behind each other, or it shares a saturated
// core) is waited for, and one that stopped answering is not.
//
// The bound is twice the slowest successful call of the last one to two
// windows of five seconds (the current window and the one before), plus
// pause, at least floor and at most ceiling: a call that outlasts it took
// more than twice as long as any the store answered lately, and more than
// a pause the store takes of itself while healthy (Redis deleting many
// expired keys at once: Config.StorePause), which is failure, not
// queueing. The pause is added, not folded into the slowest call: such a
// pause comes seldom, so the last windows need not have seen one, and a
// call may meet one on top of the queueing they did see. A mean
// and deviation (TCP's RTO) would not do: under load most calls are fast
// and a few wait behind a stall, and it is the few that must not time out.
// The slowest call is a tail estimate that costs one atomic compare per
// call. The bound rises at once with a slower call and falls a window or
// two after the slow calls stop: long enough to remember the stalls of a
// busy host, which come every few seconds, from one to the next.
//
// A call that timed out took at least its bound: it counts as a call that
// slow, so the bound doubles for the next window or two. The calls
// of one stall, all made under the same bound, double it once; a store
// that stopped answering meets bounds of b, 2b + pause, 4b + 3·pause...
// up to ceiling, from a bound b. Safe for concurrent use; the bound in force is read without a
// lock, and a call no slower than the slowest of its window costs one
// atomic load.
//
// A bound that has not seen a whole window of calls — a new one, or one
// whose store had no call for two windows — knows nothing of the store's
// stalls, and is the ceiling until it has: the first stall of a limiter's
// life is not cut at twice the few fast calls before it.
type adaptiveTimeout struct {
	floor, ceiling time.Duration
	pause          time.Duration
	window         time.Duration

	curMax  atomic.Int64 // ns, slowest call of the current window
	started atomic.Int64 // Unix ns, when the current window began

	mu       sync.Mutex // for rotating windows and setting the bound
	prevMax  time.Duration
	learning bool // no whole window of calls seen yet: the bound is the ceiling

	cur atomic.Int64 // the bound in force, ns
}

// timeoutWindow is how long a slow call weighs on the bound: one to two
// windows.
const timeoutWindow = 5 * time.Second

func newAdaptiveTimeout(floor, ceiling, pause time.Duration) *adaptiveTimeout {
	a := &adaptiveTimeout{floor: floor, ceiling: max(floor, ceiling), pause: pause, window: timeoutWindow, learning: true}
	a.cur.Store(int64(a.ceiling))
	return a
}

// bound returns the timeout in force for a call made now.
func (a *adaptiveTimeout) bound() time.Duration { return time.Duration(a.cur.Load()) }

// observe records the latency d of a call that succeeded at now.
func (a *adaptiveTimeout) observe(d time.Duration, now time.Time) {
	t := now.UnixNano()
	if t-a.started.Load() >= int64(a.window) {
		a.mu.Lock()
		if s := a.started.Load(); t-s >= int64(a.window) {
			a.prevMax = time.Duration(a.curMax.Load())
			a.learning = false
			if t-s >= 2*int64(a.window) {
				// The first call, or the first after a window without
				// one: the bound learns again.
				a.prevMax, a.learning = 0, true
			}
			a.curMax.Store(0)
			a.started.Store(t)
			a.set()
		}
		a.mu.Unlock()
	}
	for m := a.curMax.Load(); int64(d) > m; m = a.curMax.Load() {
		if a.curMax.CompareAndSwap(m, int64(d)) {
			a.mu.Lock()
			a.set()
			a.mu.Unlock()
			return
		}
	}
}

// timedOut records a call that timed out at now under the bound it was
// given: it took at least that long.
func (a *adaptiveTimeout) timedOut(bound time.Duration, now time.Time) { a.observe(bound, now) }

// set computes the bound; a.mu is held.
func (a *adaptiveTimeout) set() {
	if a.learning {
		a.cur.Store(int64(a.ceiling))
		return
	}
	slowest := max(a.prevMax, time.Duration(a.curMax.Load()))
	a.cur.Store(int64(min(max(2*slowest+a.pause, a.floor), a.ceiling)))
}
