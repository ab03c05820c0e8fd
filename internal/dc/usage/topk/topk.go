package topk

import (
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
)

// MaxK is the largest number of counters a Sketch may have.
const MaxK = 1 << 20

// ErrInvalidK is returned by New for a K outside [1, MaxK].
var ErrInvalidK = errors.New("topk: invalid number of counters")

// Entry is a monitored key and its estimate.
type Entry struct {
	// Key is the key.
	Key string
	// Count overestimates the key's total weight: the true total lies in
	// [Count-Err, Count].
	Count uint64
	// Err bounds the overestimate: the count the key inherited when it
	// took its counter over (0 when it never displaced another key).
	Err uint64
}

// Guaranteed returns Count-Err, a lower bound of the key's true total.
func (e Entry) Guaranteed() uint64 { return e.Count - e.Err }

// Sketch is a Space-Saving summary with K counters; see the package
// documentation for its guarantees.
//
// Add costs O(log K) (a map lookup and a heap adjustment) and allocates
// nothing once the Sketch has reused its buffers for keys as long as the
// ones added; memory is O(K) plus, per counter, the longest key it has
// held. A Sketch is not safe for concurrent use; the zero value is not
// usable: create one with New.
type Sketch struct {
	k       int
	seed    maphash.Seed
	entries []entry          // len ≤ k; slots past len keep their key buffers for reuse
	heap    []int32          // indices into entries, a min-heap by count
	index   map[uint64]int32 // key hash → index into entries
	total   uint64
}

type entry struct {
	key   []byte
	hash  uint64
	count uint64
	err   uint64
	pos   int32 // index in heap
}

// New returns an empty Sketch with k counters, k in [1, MaxK].
func New(k int) (*Sketch, error) {
	if k < 1 || k > MaxK {
		return nil, fmt.Errorf("%w: %d, want 1 to %d", ErrInvalidK, k, MaxK)
	}
	return &Sketch{
		k:       k,
		seed:    maphash.MakeSeed(),
		entries: make([]entry, 0, k),
		heap:    make([]int32, 0, k),
		index:   make(map[uint64]int32, k),
	}, nil
}

// K returns the number of counters.
func (s *Sketch) K() int { return s.k }

// Len returns the number of keys monitored, at most K.
func (s *Sketch) Len() int { return len(s.entries) }

// Total returns the total weight added since New or Reset.
func (s *Sketch) Total() uint64 { return s.total }

// Min returns the smallest count of the monitored keys while all K
// counters are in use, and 0 before: no key outside the Sketch has a true
// total above Min, which is at most Total/K.
func (s *Sketch) Min() uint64 {
	if len(s.entries) < s.k {
		return 0
	}
	return s.entries[s.heap[0]].count
}

// Add adds n to key's count. An n of 0 changes nothing. The Sketch copies
// the key's bytes; it does not retain key.
func (s *Sketch) Add(key string, n uint64) {
	if n == 0 {
		return
	}
	s.total += n
	h := maphash.String(s.seed, key)
	if i, ok := s.index[h]; ok {
		e := &s.entries[i]
		if string(e.key) != key {
			// A hash collision: key takes the counter over as if it
			// were the smallest. Its own estimate stays an overestimate
			// (the counter is at least Min); the key displaced loses its
			// count.
			e.key = append(e.key[:0], key...)
			e.err = e.count
		}
		e.count += n
		s.down(int(e.pos))
		return
	}
	if m := len(s.entries); m < s.k {
		s.entries = s.entries[:m+1]
		e := &s.entries[m]
		e.key = append(e.key[:0], key...)
		e.hash, e.count, e.err, e.pos = h, n, 0, int32(m)
		s.index[h] = int32(m)
		s.heap = append(s.heap, int32(m))
		s.up(m)
		return
	}
	i := s.heap[0]
	e := &s.entries[i]
	delete(s.index, e.hash)
	e.key = append(e.key[:0], key...)
	e.hash = h
	e.err = e.count
	e.count += n
	s.index[h] = i
	s.down(0)
}

// Count returns key's entry, if key is monitored. A key that is not has a
// true total of at most Min.
func (s *Sketch) Count(key string) (Entry, bool) {
	i, ok := s.index[maphash.String(s.seed, key)]
	if !ok || string(s.entries[i].key) != key {
		return Entry{}, false
	}
	e := &s.entries[i]
	return Entry{Key: key, Count: e.count, Err: e.err}, true
}

// Top appends the monitored keys to dst, by decreasing count (ties by
// key), and returns the extended slice. Pass a dst with capacity K to
// avoid growing it; the keys themselves are new strings.
func (s *Sketch) Top(dst []Entry) []Entry {
	start := len(dst)
	for i := range s.entries {
		e := &s.entries[i]
		dst = append(dst, Entry{Key: string(e.key), Count: e.count, Err: e.err})
	}
	slices.SortFunc(dst[start:], func(a, b Entry) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return dst
}

// Reset forgets every key and the total, keeping the memory for reuse.
func (s *Sketch) Reset() {
	s.entries = s.entries[:0]
	s.heap = s.heap[:0]
	clear(s.index)
	s.total = 0
}

// less orders heap positions i and j by count.
func (s *Sketch) less(i, j int) bool {
	return s.entries[s.heap[i]].count < s.entries[s.heap[j]].count
}

func (s *Sketch) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.entries[s.heap[i]].pos = int32(i)
	s.entries[s.heap[j]].pos = int32(j)
}

// up restores the heap order from position i towards the root.
func (s *Sketch) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

// down restores the heap order from position i towards the leaves: counts
// only grow, so an entry only ever moves down.
func (s *Sketch) down(i int) {
	n := len(s.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && s.less(r, l) {
			c = r
		}
		if !s.less(c, i) {
			return
		}
		s.swap(i, c)
		i = c
	}
}
