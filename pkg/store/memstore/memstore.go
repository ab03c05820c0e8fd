package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
)

// Config configures a Store. The zero value is usable.
type Config struct {
	// MaxKeys caps the number of keys held. Each shard holds at most
	// MaxKeys/Shards keys, so a skewed key set may be capped a little
	// sooner. Default 1,000,000.
	MaxKeys int
	// Shards is the number of independently locked shards, rounded up to a
	// power of two. Default 64.
	Shards int
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if c.MaxKeys < 0 || c.Shards < 0 {
		return fmt.Errorf("memstore: negative MaxKeys %d or Shards %d", c.MaxKeys, c.Shards)
	}
	return nil
}

const (
	defaultMaxKeys = 1_000_000
	defaultShards  = 64
	// evictSample is how many keys an eviction compares.
	evictSample = 8
	// sweepEvery bounds how often, in request time, a full shard is swept.
	sweepEvery = 1000 // ms
)

// Store is an in-memory rate-limit store, safe for concurrent use. Create it
// with New; the zero value is not usable.
type Store struct {
	seed     maphash.Seed
	mask     uint64
	perShard int
	shards   []shard
	// evictions counts live keys dropped to make room.
	evictions atomic.Uint64
}

type shard struct {
	mu        sync.Mutex
	m         map[string]*entry
	lastSweep int64
	_         [40]byte // keep shards on separate cache lines
}

type entry struct {
	alg    algorithm.Algorithm
	expiry int64 // Unix ms after which state equals a fresh one
	state  algorithm.State
}

// New returns an empty store.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	maxKeys := cfg.MaxKeys
	if maxKeys == 0 {
		maxKeys = defaultMaxKeys
	}
	n := cfg.Shards
	if n == 0 {
		n = defaultShards
	}
	pow := 1
	for pow < n {
		pow <<= 1
	}
	pow = min(pow, max(1, maxKeys))
	for pow&(pow-1) != 0 { // maxKeys clamp may break the power of two
		pow &= pow - 1
	}
	s := &Store{
		seed:     maphash.MakeSeed(),
		mask:     uint64(pow - 1),
		perShard: maxKeys / pow, // rounded down: never more than MaxKeys in all
		shards:   make([]shard, pow),
	}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*entry)
	}
	return s, nil
}

func (s *Store) shard(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)&s.mask]
}

// Decide decides every request at now. It never fails as a whole; a
// request that does not validate gets its error in its Result.
func (s *Store) Decide(_ context.Context, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error) {
	out := make([]algorithm.Result, len(reqs))
	t := now.UnixMilli()
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			out[i].Err = err
			continue
		}
		out[i].Decision = s.decide(r, now, t)
	}
	return out, nil
}

func (s *Store) decide(r algorithm.Request, now time.Time, t int64) algorithm.Decision {
	sh := s.shard(r.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[r.Key]
	var st algorithm.State
	if e != nil && e.alg == r.Params.Algorithm && e.expiry > t {
		st = e.state
	}
	d, next := algorithm.Decide(r.Params, st, now, r.Cost)
	if e == nil {
		if d.Used == 0 {
			// The key holds nothing (a peek, or a rejection that took
			// nothing): a fresh key stays absent. A FixedWindow that
			// counts rejections (Params.CountRejected) takes a rejected
			// cost too, and must keep it: the Redis script writes it, and
			// a window once over stays over, peeks included.
			return d
		}
		e = sh.insert(s.perShard, r.Key, t, &s.evictions)
	}
	// An existing entry always takes the next state: the sliding window
	// log's Decide compacts the log in place.
	e.alg = r.Params.Algorithm
	e.state = next
	e.expiry = expiry(r.Params, next, now, e.expiry)
	return d
}

// expiry returns when an entry whose expiry was prev may be forgotten
// after it took state s under p: algorithm.Expiry, but for a bucket at a
// limit of 0 still holding some fill, which never drains there, prev —
// when it would have drained at its last positive rate, as the Redis
// script keeps the key's TTL (storetest's "fill kept at a limit of
// zero"). Forgetting it at once let a DC that gave its share up and got
// it back admit its whole capacity again.
func expiry(p algorithm.Params, s algorithm.State, now time.Time, prev int64) int64 {
	e := algorithm.Expiry(p, s, now)
	if e == math.MaxInt64 {
		e = max(prev, now.UnixMilli())
	}
	return e
}

// insert adds a new entry for key, making room first if the shard is full,
// and counts in evictions a key dropped before it expired. The caller
// holds sh.mu.
func (sh *shard) insert(limit int, key string, now int64, evictions *atomic.Uint64) *entry {
	if len(sh.m) >= limit && now-sh.lastSweep >= sweepEvery {
		sh.lastSweep = now
		for k, e := range sh.m {
			if e.expiry <= now {
				delete(sh.m, k)
			}
		}
	}
	if len(sh.m) >= limit {
		var victim string
		var soonest int64
		n := 0
		for k, e := range sh.m {
			if n == 0 || e.expiry < soonest {
				victim, soonest = k, e.expiry
			}
			if n++; n == evictSample {
				break
			}
		}
		delete(sh.m, victim)
		if soonest > now {
			evictions.Add(1)
		}
	}
	e := &entry{}
	sh.m[key] = e
	return e
}

// Refund gives back the cost of requests admitted at time at (see
// algorithm.Refund). Requests that do not validate are skipped; the first
// such error is returned after the others are applied.
func (s *Store) Refund(_ context.Context, at, now time.Time, reqs []algorithm.Request) error {
	t := now.UnixMilli()
	var first error
	for _, r := range reqs {
		if err := r.Validate(); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if r.Cost == 0 {
			continue
		}
		sh := s.shard(r.Key)
		sh.mu.Lock()
		if e := sh.m[r.Key]; e != nil && e.alg == r.Params.Algorithm && e.expiry > t {
			e.state = algorithm.Refund(r.Params, e.state, at, now, r.Cost)
			e.expiry = expiry(r.Params, e.state, now, e.expiry)
		}
		sh.mu.Unlock()
	}
	return first
}

// Evictions returns how many keys the store dropped, since it was created,
// before they expired, to make room for others (MaxKeys reached). A key
// dropped early forgets what it spent: a steady count means MaxKeys is too
// small for the keys in use.
func (s *Store) Evictions() uint64 { return s.evictions.Load() }

// Len returns the number of keys held, expired ones included until they
// are reclaimed.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// Sweep drops every key that has expired at now and returns how many it
// dropped. The store also reclaims expired keys by itself when full; an
// owner may call Sweep periodically to return memory sooner.
func (s *Store) Sweep(now time.Time) int {
	t := now.UnixMilli()
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			if e.expiry <= t {
				delete(sh.m, k)
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}
