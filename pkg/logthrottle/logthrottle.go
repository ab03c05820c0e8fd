// Package logthrottle bounds how often a kind of log line is written. It
// is the one mechanism for lines that input from outside can cause at any
// rate — a malformed message on a topic, an upstream that refuses every
// request, a URL someone wrote into etcd, a store that fails every call —
// so that a flood of such input costs the process a line per period, not
// a line per event.
//
// The first line of a kind is written at once; after it, at most one per
// period. Callers that hold lines back learn how many when the next is
// written, and say so in it, so that no event goes unreported, only
// unrepeated.
package logthrottle

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// HeldKey is the attribute every throttled line carries: how many lines
// of its kind were held back since the last one written.
const HeldKey = "unlogged_since_last_line"

// Held returns the attribute HeldKey with held, for a line Allow let
// through.
func Held(held int64) slog.Attr { return slog.Int64(HeldKey, held) }

// Throttle lets one kind of line through at most once per period. Safe
// for concurrent use; lock-free. Make one with New.
type Throttle struct {
	period time.Duration
	now    func() time.Time
	// next is the Unix ns before which lines are held back (0: none
	// written yet), held how many were held back since the last written.
	next atomic.Int64
	held atomic.Int64
}

// New returns a Throttle that lets a line through at most once per
// period, reading the time from now (time.Now if nil).
func New(period time.Duration, now func() time.Time) *Throttle {
	if now == nil {
		now = time.Now
	}
	return &Throttle{period: period, now: now}
}

// Allow reports whether a line may be written now. When it may, held is
// how many lines Allow held back since the last one it let through (the
// line should say so); when it may not, this line is counted among them.
// Of several goroutines that call Allow at once when the period has
// passed, exactly one is let through.
func (t *Throttle) Allow() (held int64, ok bool) {
	now := t.now().UnixNano()
	next := t.next.Load()
	if next != 0 && now < next || !t.next.CompareAndSwap(next, max(now+int64(t.period), 1)) {
		t.held.Add(1)
		return 0, false
	}
	return t.held.Swap(0), true
}

// Keyed is a Throttle for each key: lines about one key (a URL, a node)
// are held back without holding back lines about another. It remembers at
// most maxKeys keys at once, forgetting those whose period has passed
// when it must; past that, the keys it cannot remember share one Throttle,
// so that input naming ever new keys still costs one line per period.
// Safe for concurrent use. Make one with NewKeyed.
type Keyed struct {
	period  time.Duration
	now     func() time.Time
	maxKeys int

	mu   sync.Mutex
	keys map[string]*keyState
	rest *Throttle
}

type keyState struct {
	next time.Time
	held int64
}

// NewKeyed returns a Keyed that lets a line about each key through at
// most once per period, remembering at most maxKeys keys (at least 1),
// reading the time from now (time.Now if nil).
func NewKeyed(period time.Duration, maxKeys int, now func() time.Time) *Keyed {
	if now == nil {
		now = time.Now
	}
	return &Keyed{period: period, now: now, maxKeys: max(1, maxKeys), keys: map[string]*keyState{}, rest: New(period, now)}
}

// Allow is Throttle.Allow for the lines about key.
func (k *Keyed) Allow(key string) (held int64, ok bool) {
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.keys[key]
	if s == nil {
		if len(k.keys) >= k.maxKeys {
			k.forget(now)
		}
		if len(k.keys) >= k.maxKeys {
			return k.rest.Allow()
		}
		s = &keyState{}
		k.keys[key] = s
	} else if now.Before(s.next) {
		s.held++
		return 0, false
	}
	held, s.next, s.held = s.held, now.Add(k.period), 0
	return held, true
}

// forget drops the keys whose period has passed and that hold nothing
// back. The caller holds mu.
func (k *Keyed) forget(now time.Time) {
	for key, s := range k.keys {
		if !now.Before(s.next) && s.held == 0 {
			delete(k.keys, key)
		}
	}
}
