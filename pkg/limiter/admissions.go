package limiter

import (
	"hash/maphash"
	"math"
	"sync"
)

// admissions counts, per key, what the store admitted for rules of
// failure_mode local, in buckets as long as the rule's memory
// (algorithm.Params.Memory), so that a key first decided in memory after
// the store fails starts from about what was admitted in its window
// rather than from nothing. It is compact and cheap, since every such
// admission passes through it: keys by 64-bit hash (a collision only
// over-counts), values without pointers (the GC does not scan them), no
// allocation once a key is known. Bounded: a full shard drops entries
// past their buckets, then a few arbitrary ones. Safe for concurrent use.
type admissions struct {
	seed     maphash.Seed
	perShard int
	shards   [admShards]admShard
}

const admShards = 64

type admShard struct {
	mu        sync.Mutex
	m         map[uint64]admEntry
	lastSweep int64    // Unix ms
	_         [40]byte // keep shards on separate cache lines
}

// admSweepEvery bounds how often, in request time, a full shard is swept.
const admSweepEvery = 1000 // ms

// admEntry holds the counts of the bucket [start, start+mem) (Unix ms)
// and of the bucket before it.
type admEntry struct {
	start, mem int64
	cur, prev  int64
}

func newAdmissions(maxKeys int) *admissions {
	a := &admissions{seed: maphash.MakeSeed(), perShard: max(1, maxKeys/admShards)}
	for i := range a.shards {
		a.shards[i].m = make(map[uint64]admEntry)
	}
	return a
}

func (a *admissions) shard(key string) (*admShard, uint64) {
	h := maphash.String(a.seed, key)
	return &a.shards[h%admShards], h
}

// add counts cost (negative for a refund) admitted for key at now (Unix
// ms), under a rule whose memory is mem ms.
func (a *admissions) add(key string, now, mem, cost int64) {
	if mem <= 0 {
		return
	}
	sh, h := a.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.m[h]
	if !ok {
		if cost <= 0 {
			return
		}
		if len(sh.m) >= a.perShard {
			sh.makeRoom(now)
		}
	}
	e = e.roll(now, mem)
	e.cur = max(0, e.cur+cost)
	sh.m[h] = e
}

// used returns about what was admitted for key in the mem ms before now:
// the current bucket, and the previous one weighted by how much of it is
// still within mem of now (as the sliding window counter weighs it),
// rounded up.
func (a *admissions) used(key string, now, mem int64) int64 {
	if mem <= 0 {
		return 0
	}
	sh, h := a.shard(key)
	sh.mu.Lock()
	e, ok := sh.m[h]
	sh.mu.Unlock()
	if !ok {
		return 0
	}
	e = e.roll(now, mem)
	left := 1 - float64(now-e.start)/float64(mem)
	return e.cur + int64(math.Ceil(float64(e.prev)*left))
}

// roll moves e to the bucket of length mem holding now.
func (e admEntry) roll(now, mem int64) admEntry {
	b := now - now%mem
	switch {
	case e.mem == mem && b == e.start:
		return e
	case e.mem == mem && b == e.start+mem:
		return admEntry{start: b, mem: mem, prev: e.cur}
	}
	return admEntry{start: b, mem: mem}
}

// makeRoom drops the entries whose counts no longer matter at now (at
// most once per admSweepEvery), and if that freed nothing, a few arbitrary
// ones. The caller holds sh.mu.
func (sh *admShard) makeRoom(now int64) {
	n := len(sh.m)
	if now-sh.lastSweep >= admSweepEvery {
		sh.lastSweep = now
		for h, e := range sh.m {
			if e.start+2*e.mem <= now {
				delete(sh.m, h)
			}
		}
	}
	if len(sh.m) < n {
		return
	}
	i := 0
	for h := range sh.m {
		delete(sh.m, h)
		if i++; i == 8 {
			return
		}
	}
}
