package algorithm

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"
)

// Algorithm names one of the five rate-limiting algorithms. The zero value is
// not a valid algorithm; Default is SlidingWindowCounter.
type Algorithm uint8

// The algorithms, by the names rule documents use.
const (
	// TokenBucket holds up to Burst tokens (default Limit), refilled at Limit
	// per Window; a request takes Cost tokens. Allows bursts.
	TokenBucket Algorithm = iota + 1
	// LeakyBucket is a bucket of capacity Burst (default 1) that drains at
	// Limit per Window; a request pours in Cost. With the default capacity it
	// paces requests to one every Window/Limit: it smooths bursts.
	LeakyBucket
	// FixedWindow counts requests in windows aligned to the Unix epoch.
	FixedWindow
	// SlidingWindowLog remembers the time of every admitted request: exact.
	SlidingWindowLog
	// SlidingWindowCounter weighs the previous fixed window's count by its
	// overlap with the sliding window. The default.
	SlidingWindowCounter
)

// Default is the algorithm of a rule that names none.
const Default = SlidingWindowCounter

// All lists every algorithm, in declaration order.
var All = [...]Algorithm{TokenBucket, LeakyBucket, FixedWindow, SlidingWindowLog, SlidingWindowCounter}

var names = [...]string{
	TokenBucket:          "TokenBucket",
	LeakyBucket:          "LeakyBucket",
	FixedWindow:          "FixedWindow",
	SlidingWindowLog:     "SlidingWindowLog",
	SlidingWindowCounter: "SlidingWindowCounter",
}

// String returns the algorithm's name as rule documents spell it.
func (a Algorithm) String() string {
	if a.Valid() {
		return names[a]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// Valid reports whether a is one of the five algorithms.
func (a Algorithm) Valid() bool { return a >= TokenBucket && a <= SlidingWindowCounter }

// IsBucket reports whether a is TokenBucket or LeakyBucket, the algorithms
// that take a Burst.
func (a Algorithm) IsBucket() bool { return a == TokenBucket || a == LeakyBucket }

// ErrUnknown is returned by Parse for a name that is not an algorithm.
var ErrUnknown = errors.New("algorithm: unknown algorithm")

// Parse returns the algorithm with the given name (exactly as String spells
// it). An empty name is an error; callers apply Default themselves.
func Parse(name string) (Algorithm, error) {
	for _, a := range All {
		if names[a] == name {
			return a, nil
		}
	}
	return 0, fmt.Errorf("%w %q (want one of TokenBucket, LeakyBucket, FixedWindow, SlidingWindowLog, SlidingWindowCounter)", ErrUnknown, name)
}

// MarshalText implements encoding.TextMarshaler.
func (a Algorithm) MarshalText() ([]byte, error) {
	if !a.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknown, uint8(a))
	}
	return []byte(names[a]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Algorithm) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// Limits on parameters. They keep every intermediate value of every
// algorithm below 2^53, so integer arithmetic in Go and double arithmetic in
// Redis's Lua agree exactly.
const (
	// MaxLimit is the largest Limit or Burst.
	MaxLimit = 1_000_000_000_000
	// MaxWindow is the longest Window.
	MaxWindow = 366 * 24 * time.Hour
	// MaxLogLimit is the largest Limit of a SlidingWindowLog, which stores
	// one entry per admitted unit of cost.
	MaxLogLimit = 100_000
	// maxExact is 2^53, the first integer a float64 cannot step past by one.
	maxExact = 1 << 53
)

// ErrInvalidParams is wrapped by Params.Validate's errors.
var ErrInvalidParams = errors.New("algorithm: invalid parameters")

// Params are the limit in force for one key: the rule's limit, or a DC's
// share of it, and the rule's window and burst.
type Params struct {
	Algorithm Algorithm
	// Limit is the number of units of cost admitted per Window. Zero admits
	// nothing (a DC whose share is zero).
	Limit int64
	// Window is the period Limit applies to; whole milliseconds count.
	Window time.Duration
	// Burst is the capacity of a bucket algorithm. Zero means the default:
	// Limit for TokenBucket, 1 for LeakyBucket. Other algorithms ignore it.
	Burst int64
	// CountRejected makes a FixedWindow count the cost of a request it
	// rejects too, as envoyproxy/ratelimit counts (it increments, then
	// compares): once a window's count passes Limit, every later request
	// in that window is rejected, even one of cost 0. Other algorithms
	// ignore it.
	CountRejected bool
	// Calendar places a FixedWindow's windows: Rolling (the zero value) or
	// Month, whose Window must be MonthWindow. Other algorithms take
	// Rolling only.
	Calendar Calendar
}

// Validate reports whether p can be used, naming the first bad field.
func (p Params) Validate() error {
	w := p.Window.Milliseconds()
	switch {
	case !p.Algorithm.Valid():
		return fmt.Errorf("%w: unknown algorithm %d", ErrInvalidParams, p.Algorithm)
	case p.Limit < 0 || p.Limit > MaxLimit:
		return fmt.Errorf("%w: limit %d outside [0, %d]", ErrInvalidParams, p.Limit, int64(MaxLimit))
	case w < 1 || p.Window > MaxWindow:
		return fmt.Errorf("%w: window %v outside [1ms, %v]", ErrInvalidParams, p.Window, MaxWindow)
	case p.Burst < 0 || p.Burst > MaxLimit:
		return fmt.Errorf("%w: burst %d outside [0, %d]", ErrInvalidParams, p.Burst, int64(MaxLimit))
	case p.Algorithm == SlidingWindowLog && p.Limit > MaxLogLimit:
		return fmt.Errorf("%w: a SlidingWindowLog limit must be at most %d, got %d", ErrInvalidParams, MaxLogLimit, p.Limit)
	case p.Calendar > Month:
		return fmt.Errorf("%w: unknown calendar %d", ErrInvalidParams, p.Calendar)
	case p.Calendar == Month && p.Algorithm != FixedWindow:
		return fmt.Errorf("%w: calendar months are for FixedWindow, not %v", ErrInvalidParams, p.Algorithm)
	case p.Calendar == Month && p.Window != MonthWindow:
		return fmt.Errorf("%w: a calendar month's window is %v, got %v", ErrInvalidParams, MonthWindow, p.Window)
	case p.Algorithm.IsBucket() && (p.Capacity()+1) > maxExact/w:
		return fmt.Errorf("%w: (burst+1) x window in ms must stay below 2^53; burst %d with window %v is too large", ErrInvalidParams, p.Capacity(), p.Window)
	}
	return nil
}

// Capacity is the most units of cost the algorithm can admit at once from a
// fresh state: Burst (or its default) for the buckets, Limit otherwise.
func (p Params) Capacity() int64 {
	if !p.Algorithm.IsBucket() {
		return p.Limit
	}
	if p.Limit == 0 {
		return 0
	}
	if p.Burst > 0 {
		return p.Burst
	}
	if p.Algorithm == LeakyBucket {
		return 1
	}
	return p.Limit
}

// Memory returns how long an admission can weigh on later decisions under
// p: the window (two for the sliding window counter, whose previous window
// counts into the current one), or the time a full bucket takes to drain.
func (p Params) Memory() time.Duration {
	w := time.Duration(p.Window.Milliseconds()) * time.Millisecond
	switch p.Algorithm {
	case SlidingWindowCounter:
		return 2 * w
	case TokenBucket, LeakyBucket:
		if p.Limit <= 0 {
			return w
		}
		return time.Duration(ceilDiv(p.Capacity()*p.Window.Milliseconds(), p.Limit)) * time.Millisecond
	}
	return w
}

// ClampCost returns the cost to apply for a request of the given cost: a
// cost above Capacity can never be admitted, and applying Capacity+1
// instead gives the same decision while keeping arithmetic bounded.
// Negative costs are treated as zero.
func (p Params) ClampCost(cost int64) int64 {
	if cost < 0 {
		return 0
	}
	if c := p.Capacity(); cost > c {
		return c + 1
	}
	return cost
}

// Decision is the answer for one request.
type Decision struct {
	// Allowed reports whether the request was admitted (and its cost taken).
	Allowed bool
	// Limit is Params.Capacity: the most the key may spend at once.
	Limit int64
	// Remaining is how much cost the key could still spend now.
	Remaining int64
	// Used is what the key holds of its capacity now, by the algorithm's
	// own count: the cost in the window (fixed window, sliding window
	// log), the weighted estimate (sliding window counter), the fill
	// rounded up (buckets). Unlike Remaining it is not clamped: after the
	// limit shrank it may exceed Limit.
	Used int64
	// ResetAt is when, with no further requests, the key would be back to
	// its full Limit.
	ResetAt time.Time
	// RetryAfter is zero for an admitted request; for a rejected one, how
	// long until the same request would be admitted if no other came. A
	// request whose cost exceeds Limit can never be admitted: its
	// RetryAfter is the window.
	RetryAfter time.Duration
}

// State is one key's state. The zero value is a fresh key. Which fields are
// used depends on the algorithm; a state must only be used with the
// algorithm that produced it.
type State struct {
	// Level is, for the buckets, the bucket's fill (used tokens for
	// TokenBucket, water for LeakyBucket) in units of 1/window-ms tokens.
	Level int64
	// Last is, for the buckets, the time in Unix ms of the last update.
	Last int64
	// Window is, for the window algorithms, the start of the current window
	// in Unix ms.
	Window int64
	// Count is the cost admitted in the current window.
	Count int64
	// Prev is, for SlidingWindowCounter, the cost admitted in the window
	// before the current one.
	Prev int64
	// Log holds, for SlidingWindowLog, the Unix ms of every admitted unit of
	// cost, oldest first.
	Log []int64
}

// Decide applies a request of the given cost at now to s. It returns the
// decision and the next state; a rejected request does not consume quota,
// and a cost of zero only observes. For SlidingWindowLog the returned state
// may share s.Log's backing array.
func Decide(p Params, s State, now time.Time, cost int64) (Decision, State) {
	t := now.UnixMilli()
	cost = p.ClampCost(cost)
	switch p.Algorithm {
	case TokenBucket, LeakyBucket:
		return decideBucket(p, s, t, cost)
	case FixedWindow:
		return decideFixed(p, s, t, cost)
	case SlidingWindowCounter:
		return decideCounter(p, s, t, cost)
	case SlidingWindowLog:
		return decideLog(p, s, t, cost)
	}
	return Decision{}, s
}

// Refund gives back the cost that a request admitted at time at took, as
// seen at now. It is exact when nothing else touched the key in between
// and otherwise never returns more than was taken; cost already gone from
// the window (the window rolled, the bucket drained) is not returned.
func Refund(p Params, s State, at, now time.Time, cost int64) State {
	t, a := now.UnixMilli(), at.UnixMilli()
	if cost <= 0 {
		return s
	}
	switch p.Algorithm {
	case TokenBucket, LeakyBucket:
		return refundBucket(p, s, a, t, cost)
	case FixedWindow:
		return refundFixed(p, s, a, t, cost)
	case SlidingWindowCounter:
		return refundCounter(p, s, a, t, cost)
	case SlidingWindowLog:
		return refundLog(p, s, a, t, cost)
	}
	return s
}

// Expiry returns the Unix ms after which s is equivalent to a fresh state,
// so a store may forget it. It is never before now. A bucket at a limit
// of 0 does not drain: while it holds some fill it is never equivalent to
// a fresh one, and Expiry returns math.MaxInt64. (A store may keep the
// expiry it had under the last positive limit instead: when the fill
// would have drained at that rate, the rule's own bucket has drained what
// was admitted. Package memstore and the Redis store do.)
func Expiry(p Params, s State, now time.Time) int64 {
	t := now.UnixMilli()
	w := p.Window.Milliseconds()
	var e int64
	switch p.Algorithm {
	case TokenBucket, LeakyBucket:
		if p.Limit > 0 {
			e = max(s.Last, t) + ceilDiv(s.Level, p.Limit)
		} else if s.Level > 0 {
			return math.MaxInt64
		}
	case FixedWindow:
		_, e = p.bounds(s.Window)
	case SlidingWindowCounter:
		e = s.Window + 2*w
	case SlidingWindowLog:
		if n := len(s.Log); n > 0 {
			e = s.Log[n-1] + w
		}
	}
	return max(e, t)
}

func ms(t int64) time.Time { return time.UnixMilli(t) }

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// windowStart returns the start of the window of length w holding t.
func windowStart(t, w int64) int64 {
	r := t % w
	if r < 0 {
		r += w
	}
	return t - r
}

// never is the RetryAfter of a request that can never be admitted.
func never(p Params) time.Duration { return time.Duration(p.Window.Milliseconds()) * time.Millisecond }

func msDuration(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// Describe builds the decision for a request of the given cost (already
// clamped with ClampCost) from the state it left behind. Stores that run
// the transition elsewhere (a Redis script) use it to report decisions
// exactly as Decide does. It must not be used for SlidingWindowLog, whose
// stores report a LogView to DescribeLog instead.
func Describe(p Params, s State, now time.Time, cost int64, allowed bool) Decision {
	t := now.UnixMilli()
	switch p.Algorithm {
	case TokenBucket, LeakyBucket:
		return describeBucket(p, s, t, cost, allowed)
	case FixedWindow:
		return describeFixed(p, s, t, cost, allowed)
	case SlidingWindowCounter:
		return describeCounter(p, s, t, cost, allowed)
	}
	return Decision{}
}

// Consumed returns what a key has consumed of its limit, in units of
// p.Limit, from the decision d of an observation (a request of cost zero)
// under p: the count in the window for the window algorithms (the sliding
// window counter's weighted previous window included, rounded up), and
// for the buckets the fill, scaled from the capacity to the limit and
// rounded up. Whatever a key does later, under a limit l, what it has
// consumed stays at most max(what it has consumed now, l) — the property
// global quotas build on (docs/architecture.md, "Usage-aware limits").
// Every algorithm counts exactly, full or not (Decision.Used); a bucket's
// observation must have settled its drain (a store writes the drained
// state of an observation), or a later drain at a slower rate could leave
// it holding more than it read. ok is false only for a bucket of capacity
// zero, whose fill cannot be scaled (nor trusted when it reads empty: a
// store may have forgotten it, Expiry).
func Consumed(p Params, d Decision) (consumed int64, ok bool) {
	used := max(d.Used, 0)
	if !p.Algorithm.IsBucket() {
		return used, true
	}
	if d.Limit <= 0 {
		return 0, false
	}
	if d.Limit != p.Limit {
		return mulDivCeil(used, p.Limit, d.Limit), true
	}
	return used, true
}

// mulDivCeil returns ⌈a × b ÷ c⌉ for a, b ≥ 0 and c > 0 without
// overflowing in between, saturating at math.MaxInt64.
func mulDivCeil(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r > 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}
