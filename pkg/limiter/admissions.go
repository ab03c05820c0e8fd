package limiter

import (
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
)

// admissions counts, per key, what the store admitted for rules of
// failure_mode local, in buckets as long as the rule's memory
// (algorithm.Params.Memory), so that a key first decided in memory after
// the store fails starts from about what was admitted in its window
// rather than from nothing. It is compact and cheap, since every such
// admission passes through it: keys by 64-bit hash (a collision only
// over-counts), values without pointers (the GC does not scan them), and
// a key's count in its set of admWays slots (or the next set), so that a
// count costs two cache lines (the set's hashes and the entry), loaded
// together when the key sits in its home slot, as most do
// (BenchmarkAdmissionsAdd reports how many). The
// keys are spread over admShards tables, each with its own lock, that
// start small and double when half full, dropping on the way the counts
// that no longer matter, and when a key's set and the next are full of
// counts that matter; up to twice maxKeys slots in all (rounded up to a
// power of two sets a table). A key new to a set and the next, both
// full, takes a slot there whose counts no longer matter; only at the cap
// does it take the one whose bucket is oldest, whose count is then
// forgotten. Safe for concurrent use.
type admissions struct {
	seed    maphash.Seed
	maxSets int // per shard, a power of two
	shards  [admShards]admShard
}

// admWays is the number of slots of a set: its hashes fill a cache line.
// A key takes a slot of its set, or of the next set when its own is full.
const admWays = 1 << admWaysLog

// admWaysLog is log2(admWays): a key's home slot in its set is its
// hash's top admWaysLog bits.
const admWaysLog = 3

// admShards is the number of tables, each with its own lock.
const admShards = 64

// admFirstSets is the number of sets a shard's table starts with.
const admFirstSets = 4

type admShard struct {
	mu sync.Mutex
	// tags[s*admWays+i] is the hash (never 0) of the key in slot i of
	// set s, or 0 for a free slot; entries holds the slots' counts.
	tags    []uint64
	entries []admEntry
	used    int      // slots holding a key
	_       [64]byte // 128 bytes a shard: no two shards' locks share a cache line
}

// admEntry holds the counts of the bucket [start, start+mem) (Unix ms)
// and of the bucket before it.
type admEntry struct {
	start, mem int64
	cur, prev  int64
}

// matters reports whether e's counts still weigh on a decision at now.
func (e *admEntry) matters(now int64) bool { return e.start+2*e.mem > now }

// mattering returns how many slots hold counts that matter at now. The
// caller holds sh.mu.
func (sh *admShard) mattering(now int64) int {
	n := 0
	for i, t := range sh.tags {
		if t != 0 && sh.entries[i].matters(now) {
			n++
		}
	}
	return n
}

// newAdmissions returns the counts for maxKeys keys: twice as many slots
// (40 bytes each) or up to twice that, taken as keys come.
func newAdmissions(maxKeys int) *admissions {
	maxKeys = min(maxKeys, 1<<28) // 268 million: beyond any memory, and 2*maxKeys fits an int32
	perShard := max(1, (2*maxKeys+admWays*admShards-1)/(admWays*admShards))
	a := &admissions{seed: maphash.MakeSeed(), maxSets: 1 << bits.Len(uint(perShard-1))}
	for i := range a.shards {
		a.shards[i].rebuild(min(admFirstSets, a.maxSets), a.maxSets, 0)
	}
	return a
}

// shard returns key's shard and its tag there.
func (a *admissions) shard(key string) (*admShard, uint64) {
	h := maphash.String(a.seed, key)
	return &a.shards[h%admShards], h | 1
}

// first returns the first slot of tag's set. The caller holds sh.mu.
func (sh *admShard) first(tag uint64) int {
	sets := uint64(len(sh.tags) / admWays)
	return int((tag/admShards)&(sets-1)) * admWays
}

// home returns tag's own slot in its set (chosen by the tag's top bits,
// which neither the shard nor the set uses): the slot a new key takes when
// it can, so that add can load the entry there alongside the tags, both
// cache misses at once, before it knows the key is there. The caller
// holds sh.mu.
func (sh *admShard) home(tag uint64) int {
	return sh.first(tag) + int(tag>>(64-admWaysLog))
}

// find returns the slot of tag, or -1. A key is in its set, or in the
// next one when its set was full as it came (a full set stays full until
// the table is resized). The caller holds sh.mu.
func (sh *admShard) find(tag uint64) int {
	f := sh.first(tag)
	full := true
	for i, t := range sh.tags[f : f+admWays] {
		if t == tag {
			return f + i
		}
		full = full && t != 0
	}
	if !full {
		return -1
	}
	f = sh.next(f)
	for i, t := range sh.tags[f : f+admWays] {
		if t == tag {
			return f + i
		}
	}
	return -1
}

// next returns the first slot of the set after the one starting at f.
func (sh *admShard) next(f int) int { return (f + admWays) % len(sh.tags) }

// take returns the slot a new key of tag takes at now: the first slot of
// its set, from its home slot round, that is free or whose counts no
// longer matter; else the same in the next set; else the one of the two
// whose bucket started first, whose counts still matter (live is then
// true). The caller holds sh.mu and sets the slot.
func (sh *admShard) take(tag uint64, now int64) (slot int, live bool) {
	f, h := sh.first(tag), sh.home(tag)
	oldest := h
	for _, first := range [2]int{f, sh.next(f)} {
		// Each set from the home slot's place in it, round.
		for k := range admWays {
			i := first + (h-f+k)%admWays
			if sh.tags[i] == 0 {
				sh.used++
				return i, false
			}
			if !sh.entries[i].matters(now) {
				return i, false
			}
			if sh.entries[i].start < sh.entries[oldest].start {
				oldest = i
			}
		}
	}
	return oldest, true
}

// rebuild moves the counts that still matter at now into a table of sets
// sets, or of twice as many (up to maxSets) until none is forgotten. The
// caller holds sh.mu.
func (sh *admShard) rebuild(sets, maxSets int, now int64) {
	tags, entries := sh.tags, sh.entries
	for {
		sh.tags, sh.entries, sh.used = make([]uint64, sets*admWays), make([]admEntry, sets*admWays), 0
		fits := true
		for i, t := range tags {
			if t == 0 || !entries[i].matters(now) {
				continue
			}
			j, live := sh.take(t, now)
			if live && sets < maxSets {
				fits = false
				break
			}
			sh.tags[j], sh.entries[j] = t, entries[i]
		}
		if fits {
			return
		}
		sets *= 2
	}
}

// add counts cost (negative for a refund) admitted for key at now (Unix
// ms), under a rule whose memory is mem ms.
func (a *admissions) add(key string, now, mem, cost int64) {
	if mem <= 0 {
		return
	}
	sh, tag := a.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// Most keys sit in their home slot: its entry is read before its tag
	// is compared, so that the two loads overlap.
	h := sh.home(tag)
	if e := sh.entries[h]; sh.tags[h] == tag {
		sh.entries[h] = e.plus(now, mem, cost)
		return
	}
	i := sh.find(tag)
	if i < 0 {
		if cost <= 0 {
			return
		}
		sets := len(sh.tags) / admWays
		if 2*(sh.used+1) > len(sh.tags) && sets < a.maxSets {
			// Half full: drop what no longer matters, and double unless
			// the counts that matter fill a quarter of the table or less.
			if 4*sh.mattering(now) > len(sh.tags) {
				sets *= 2
			}
			sh.rebuild(sets, a.maxSets, now)
		}
		var live bool
		for i, live = sh.take(tag, now); live && len(sh.tags)/admWays < a.maxSets; i, live = sh.take(tag, now) {
			// Both sets full of counts that matter: double rather than
			// forget one, until the cap.
			sh.rebuild(2*len(sh.tags)/admWays, a.maxSets, now)
		}
		sh.tags[i], sh.entries[i] = tag, admEntry{}
	}
	sh.entries[i] = sh.entries[i].plus(now, mem, cost)
}

// plus returns e with cost (negative for a refund) counted at now, in
// buckets of mem ms; a count never goes below 0.
func (e admEntry) plus(now, mem, cost int64) admEntry {
	e = e.roll(now, mem)
	e.cur = max(0, e.cur+cost)
	return e
}

// used returns about what was admitted for key in the mem ms before now:
// the current bucket, and the previous one weighted by how much of it is
// still within mem of now (as the sliding window counter weighs it),
// rounded up.
func (a *admissions) used(key string, now, mem int64) int64 {
	if mem <= 0 {
		return 0
	}
	sh, tag := a.shard(key)
	sh.mu.Lock()
	i := sh.find(tag)
	var e admEntry
	if i >= 0 {
		e = sh.entries[i]
	}
	sh.mu.Unlock()
	if i < 0 {
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
