package limiter

import (
	"sync"
	"sync/atomic"
)

// outageKeys remembers the keys that failure_mode local decided in memory
// while the store was away, each until the admissions made then no longer
// weigh on the key's algorithm. The store never saw those admissions, so
// while a key is remembered the local count must allow it too. Bounded: when
// full, it stops remembering single keys and holds every key until the
// latest time it was asked to remember, which is never less safe. Safe for
// concurrent use.
type outageKeys struct {
	mu    sync.Mutex
	until map[string]int64 // Unix ms
	max   int
	all   int64 // every key is held until then (Unix ms)
	// latest is the latest until of any hold, so that held answers at
	// once, without the lock, when nothing is held.
	latest atomic.Int64
}

func newOutageKeys(max int) *outageKeys {
	return &outageKeys{until: make(map[string]int64), max: max}
}

// hold remembers key until the Unix ms until; now is the time in Unix ms.
// It reports whether key was newly remembered (not when it was held
// already, nor when it could not be remembered by itself).
func (o *outageKeys) hold(key string, until, now int64) (added bool) {
	for l := o.latest.Load(); l < until && !o.latest.CompareAndSwap(l, until); l = o.latest.Load() {
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if u, ok := o.until[key]; ok && u > now {
		o.until[key] = max(u, until)
		return false
	}
	if len(o.until) >= o.max {
		for k, u := range o.until {
			if u <= now {
				delete(o.until, k)
			}
		}
	}
	if len(o.until) >= o.max {
		o.all = max(o.all, until)
		return false
	}
	o.until[key] = until
	return true
}

// held reports whether key is held at now (Unix ms). Expired entries are
// dropped as they are found.
func (o *outageKeys) held(key string, now int64) bool {
	if now >= o.latest.Load() {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if now < o.all {
		return true
	}
	u, ok := o.until[key]
	if ok && u <= now {
		delete(o.until, key)
		return false
	}
	return ok
}
