package wan

import (
	"container/heap"
	"net/netip"
	"time"
)

// classify returns the sites of an IPv4 packet's source and destination
// inside the subnet sub (a /16): site 0 is the core, site i the DC whose
// addresses are in the i-th /24. ok is false for anything else: not IPv4,
// truncated, outside sub, or a site index beyond sites.
func classify(p []byte, sub netip.Prefix, sites int) (from, to int, ok bool) {
	if len(p) < 20 || p[0]>>4 != 4 || int(p[0]&0x0f)*4 < 20 {
		return 0, 0, false
	}
	src := netip.AddrFrom4([4]byte(p[12:16]))
	dst := netip.AddrFrom4([4]byte(p[16:20]))
	if !sub.Contains(src) || !sub.Contains(dst) {
		return 0, 0, false
	}
	from, to = int(p[14]), int(p[18])
	if from >= sites || to >= sites {
		return 0, 0, false
	}
	return from, to, true
}

// packet is one packet waiting in the delay line.
type packet struct {
	due  time.Time
	seq  uint64
	path int
	data []byte
}

// packets is a min-heap of packets by due time, then arrival.
type packets []packet

func (h packets) Len() int { return len(h) }
func (h packets) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h packets) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *packets) Push(x any)   { *h = append(*h, x.(packet)) }
func (h *packets) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = packet{}
	*h = old[:len(old)-1]
	return p
}

// delayLine holds packets until their one-way delay has passed. Packets of
// one path (a direction between two sites) leave in the order they came,
// even when the path's delay shrinks meanwhile: a packet is never due
// before the one ahead of it. Each path holds at most limit packets.
//
// It is pure (time is passed in) and not safe for concurrent use.
type delayLine struct {
	limit  int
	heap   packets
	queued []int       // per path
	last   []time.Time // per path: due time of its latest packet
	seq    uint64
}

func newDelayLine(paths, limit int) *delayLine {
	return &delayLine{limit: limit, queued: make([]int, paths), last: make([]time.Time, paths)}
}

// push queues data on path, due delay after now. It returns false, and
// keeps nothing, when the path is full.
func (q *delayLine) push(now time.Time, path int, delay time.Duration, data []byte) bool {
	if q.queued[path] >= q.limit {
		return false
	}
	due := now.Add(delay)
	if due.Before(q.last[path]) {
		due = q.last[path]
	}
	q.last[path] = due
	q.seq++
	heap.Push(&q.heap, packet{due: due, seq: q.seq, path: path, data: data})
	q.queued[path]++
	return true
}

// next returns the due time of the first packet, if any.
func (q *delayLine) next() (time.Time, bool) {
	if len(q.heap) == 0 {
		return time.Time{}, false
	}
	return q.heap[0].due, true
}

// pop removes and returns the first packet if it is due at now.
func (q *delayLine) pop(now time.Time) (packet, bool) {
	if len(q.heap) == 0 || q.heap[0].due.After(now) {
		return packet{}, false
	}
	p := heap.Pop(&q.heap).(packet)
	q.queued[p.path]--
	return p, true
}

// len is the number of packets waiting.
func (q *delayLine) len() int { return len(q.heap) }
