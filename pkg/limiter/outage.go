package limiter

import "sync"

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
}

func newOutageKeys(max int) *outageKeys {
	return &outageKeys{until: make(map[string]int64), max: max}
}

// hold remembers key until the Unix ms until; now is the time in Unix ms.
func (o *outageKeys) hold(key string, until, now int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if u, ok := o.until[key]; ok {
		o.until[key] = max(u, until)
		return
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
		return
	}
	o.until[key] = until
}

// held reports whether key is held at now (Unix ms). Expired entries are
// dropped as they are found.
func (o *outageKeys) held(key string, now int64) bool {
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
