package algorithm_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
)

var t0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func ms(n int64) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func TestParseAndString(t *testing.T) {
	for _, a := range algorithm.All {
		got, err := algorithm.Parse(a.String())
		if err != nil || got != a {
			t.Errorf("Parse(%q): got %v, %v, want %v", a.String(), got, err, a)
		}
		text, err := a.MarshalText()
		if err != nil || string(text) != a.String() {
			t.Errorf("MarshalText(%v): got %q, %v", a, text, err)
		}
	}
	for _, bad := range []string{"", "tokenbucket", "Token Bucket", "GCRA"} {
		if _, err := algorithm.Parse(bad); !errors.Is(err, algorithm.ErrUnknown) {
			t.Errorf("Parse(%q): got %v, want ErrUnknown", bad, err)
		}
	}
	if algorithm.Default != algorithm.SlidingWindowCounter {
		t.Errorf("got default %v, want SlidingWindowCounter", algorithm.Default)
	}
	if _, err := algorithm.Algorithm(0).MarshalText(); err == nil {
		t.Error("MarshalText of the zero Algorithm: got nil error")
	}
}

func TestValidate(t *testing.T) {
	ok := func(a algorithm.Algorithm, limit int64, w time.Duration, burst int64) algorithm.Params {
		return algorithm.Params{Algorithm: a, Limit: limit, Window: w, Burst: burst}
	}
	tests := []struct {
		name string
		p    algorithm.Params
		ok   bool
	}{
		{"plain", ok(algorithm.FixedWindow, 10, time.Second, 0), true},
		{"zero limit", ok(algorithm.FixedWindow, 0, time.Second, 0), true},
		{"max window", ok(algorithm.SlidingWindowCounter, algorithm.MaxLimit, algorithm.MaxWindow, 0), true},
		{"no algorithm", ok(0, 10, time.Second, 0), false},
		{"negative limit", ok(algorithm.FixedWindow, -1, time.Second, 0), false},
		{"limit too large", ok(algorithm.FixedWindow, algorithm.MaxLimit+1, time.Second, 0), false},
		{"sub-millisecond window", ok(algorithm.FixedWindow, 1, time.Microsecond, 0), false},
		{"window too long", ok(algorithm.FixedWindow, 1, algorithm.MaxWindow+time.Millisecond, 0), false},
		{"negative burst", ok(algorithm.TokenBucket, 1, time.Second, -1), false},
		{"log limit", ok(algorithm.SlidingWindowLog, algorithm.MaxLogLimit, time.Second, 0), true},
		{"log limit too large", ok(algorithm.SlidingWindowLog, algorithm.MaxLogLimit+1, time.Second, 0), false},
		{"bucket product at bound", ok(algorithm.TokenBucket, 1, time.Hour, (1<<53)/3_600_000-1), true},
		{"bucket product past bound", ok(algorithm.TokenBucket, 1, time.Hour, (1<<53)/3_600_000), false},
		{"default burst is the limit", ok(algorithm.TokenBucket, 1<<40, time.Hour, 0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("got %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, algorithm.ErrInvalidParams) {
				t.Fatalf("got %v, want it to wrap ErrInvalidParams", err)
			}
		})
	}
}

func TestCapacityAndClamp(t *testing.T) {
	tests := []struct {
		p        algorithm.Params
		capacity int64
	}{
		{algorithm.Params{Algorithm: algorithm.TokenBucket, Limit: 5}, 5},
		{algorithm.Params{Algorithm: algorithm.TokenBucket, Limit: 5, Burst: 9}, 9},
		{algorithm.Params{Algorithm: algorithm.LeakyBucket, Limit: 5}, 1},
		{algorithm.Params{Algorithm: algorithm.LeakyBucket, Limit: 5, Burst: 3}, 3},
		{algorithm.Params{Algorithm: algorithm.LeakyBucket, Limit: 0, Burst: 3}, 0},
		{algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 5, Burst: 9}, 5},
	}
	for _, tt := range tests {
		if got := tt.p.Capacity(); got != tt.capacity {
			t.Errorf("%+v: got capacity %d, want %d", tt.p, got, tt.capacity)
		}
		if got := tt.p.ClampCost(1 << 60); got != tt.capacity+1 {
			t.Errorf("%+v: got clamped cost %d, want %d", tt.p, got, tt.capacity+1)
		}
		if got := tt.p.ClampCost(-3); got != 0 {
			t.Errorf("%+v: got clamped negative cost %d, want 0", tt.p, got)
		}
	}
}

// randomParams returns small parameters so random walks hit every edge.
func randomParams(rng *rand.Rand, a algorithm.Algorithm) algorithm.Params {
	p := algorithm.Params{Algorithm: a, Limit: int64(rng.IntN(8)), Window: time.Duration(1+rng.IntN(2000)) * time.Millisecond}
	if a.IsBucket() && rng.IntN(2) == 0 {
		p.Burst = int64(1 + rng.IntN(10))
	}
	return p
}

// walk drives random traffic through the pure algorithm and calls check
// before each request with the state and the decision it gets.
func walk(t *testing.T, seed uint64, check func(p algorithm.Params, s algorithm.State, now int64, cost int64, d algorithm.Decision)) {
	for _, a := range algorithm.All {
		t.Run(a.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(a)))
			for range 200 {
				p := randomParams(rng, a)
				var s algorithm.State
				now := int64(rng.IntN(1 << 20))
				for range 50 {
					now += int64(rng.IntN(int(p.Window.Milliseconds()/2 + 2)))
					cost := int64(rng.IntN(4))
					d, next := algorithm.Decide(p, cloneState(s), ms(now), cost)
					check(p, cloneState(s), now, cost, d)
					s = next
				}
			}
		})
	}
}

func cloneState(s algorithm.State) algorithm.State {
	s.Log = append([]int64(nil), s.Log...)
	return s
}

// TestRetryAfterIsTight checks that a rejected request is rejected until
// exactly RetryAfter has passed and admitted then (absent other traffic).
func TestRetryAfterIsTight(t *testing.T) {
	walk(t, 1, func(p algorithm.Params, s algorithm.State, now, cost int64, d algorithm.Decision) {
		if d.Allowed {
			if d.RetryAfter != 0 {
				t.Fatalf("%+v: admitted with RetryAfter %v", p, d.RetryAfter)
			}
			return
		}
		if cost > p.Capacity() || p.Limit == 0 {
			if d.RetryAfter != p.Window {
				t.Fatalf("%+v cost %d can never pass: got RetryAfter %v, want the window", p, cost, d.RetryAfter)
			}
			return
		}
		r := d.RetryAfter.Milliseconds()
		if r <= 0 {
			t.Fatalf("%+v state %+v cost %d at %d: rejected with RetryAfter %v", p, s, cost, now, d.RetryAfter)
		}
		if early, _ := algorithm.Decide(p, cloneState(s), ms(now+r-1), cost); early.Allowed {
			t.Fatalf("%+v state %+v cost %d at %d: admitted 1ms before RetryAfter %v", p, s, cost, now, d.RetryAfter)
		}
		if then, _ := algorithm.Decide(p, cloneState(s), ms(now+r), cost); !then.Allowed {
			t.Fatalf("%+v state %+v cost %d at %d: rejected at RetryAfter %v", p, s, cost, now, d.RetryAfter)
		}
	})
}

// TestResetAtRestoresTheFullLimit checks ResetAt: from then on, with no
// traffic, the whole capacity is available, and not one millisecond before
// (when anything is spent).
func TestResetAtRestoresTheFullLimit(t *testing.T) {
	walk(t, 2, func(p algorithm.Params, s algorithm.State, now, cost int64, d algorithm.Decision) {
		_, next := algorithm.Decide(p, cloneState(s), ms(now), cost)
		reset := d.ResetAt.Sub(t0).Milliseconds()
		if reset < now {
			t.Fatalf("%+v: ResetAt %d before now %d", p, reset, now)
		}
		full, _ := algorithm.Decide(p, cloneState(next), ms(reset), 0)
		if full.Remaining != p.Capacity() {
			t.Fatalf("%+v state %+v: at ResetAt remaining %d, want %d", p, next, full.Remaining, p.Capacity())
		}
		if reset > now {
			before, _ := algorithm.Decide(p, cloneState(next), ms(reset-1), 0)
			if before.Remaining == p.Capacity() {
				t.Fatalf("%+v state %+v: full capacity already 1ms before ResetAt %d", p, next, reset)
			}
		}
	})
}

// TestRejectionConsumesNothing checks that a rejected request leaves the
// key as a mere observation would.
func TestRejectionConsumesNothing(t *testing.T) {
	walk(t, 3, func(p algorithm.Params, s algorithm.State, now, cost int64, d algorithm.Decision) {
		if d.Allowed {
			return
		}
		_, afterReject := algorithm.Decide(p, cloneState(s), ms(now), cost)
		_, afterPeek := algorithm.Decide(p, cloneState(s), ms(now), 0)
		a, _ := algorithm.Decide(p, afterReject, ms(now+1), 1)
		b, _ := algorithm.Decide(p, afterPeek, ms(now+1), 1)
		if a != b {
			t.Fatalf("%+v: after a rejection got %+v, after a peek %+v", p, a, b)
		}
	})
}

// TestRefundRestores checks that refunding an admitted request right away
// restores the decision a fresh request would have had before it.
func TestRefundRestores(t *testing.T) {
	walk(t, 4, func(p algorithm.Params, s algorithm.State, now, cost int64, d algorithm.Decision) {
		if !d.Allowed || cost == 0 {
			return
		}
		before, _ := algorithm.Decide(p, cloneState(s), ms(now), 0)
		_, spent := algorithm.Decide(p, cloneState(s), ms(now), cost)
		refunded := algorithm.Refund(p, spent, ms(now), ms(now), cost)
		after, _ := algorithm.Decide(p, refunded, ms(now), 0)
		if after.Remaining != before.Remaining {
			t.Fatalf("%+v: remaining %d before, %d after spend+refund", p, before.Remaining, after.Remaining)
		}
	})
}

// TestExpiry checks that a state past its expiry decides like a fresh one.
func TestExpiry(t *testing.T) {
	walk(t, 5, func(p algorithm.Params, s algorithm.State, now, cost int64, d algorithm.Decision) {
		e := algorithm.Expiry(p, s, ms(now))
		if e < now {
			t.Fatalf("expiry %d before now %d", e, now)
		}
		got, _ := algorithm.Decide(p, cloneState(s), ms(e), cost)
		fresh, _ := algorithm.Decide(p, algorithm.State{}, ms(e), cost)
		if got != fresh {
			t.Fatalf("%+v state %+v at expiry %d: got %+v, fresh %+v", p, s, e, got, fresh)
		}
	})
}

// TestExpiryAtZero: a bucket at a limit of 0 does not drain, so while it
// holds some fill it never expires; empty, it is as good as fresh now.
func TestExpiryAtZero(t *testing.T) {
	for _, alg := range []algorithm.Algorithm{algorithm.TokenBucket, algorithm.LeakyBucket} {
		p := algorithm.Params{Algorithm: alg, Limit: 10, Window: time.Second, Burst: 10}
		_, full := algorithm.Decide(p, algorithm.State{}, ms(0), 10)
		p.Limit = 0
		if e := algorithm.Expiry(p, full, ms(100)); e != math.MaxInt64 {
			t.Errorf("%v at a limit of 0 holding %d: expiry %d, want never", alg, full.Level, e)
		}
		if e := algorithm.Expiry(p, algorithm.State{}, ms(100)); e != ms(100).UnixMilli() {
			t.Errorf("%v at a limit of 0, empty: expiry %d, want now", alg, e)
		}
	}
}

// TestMemory: no state outlives its admissions by more than Memory, and
// a full capacity admitted at once from a fresh state at a window's start
// lasts exactly that long.
func TestMemory(t *testing.T) {
	walk(t, 5, func(p algorithm.Params, s algorithm.State, now, cost int64, d algorithm.Decision) {
		at := ms(now).UnixMilli()
		if e, m := algorithm.Expiry(p, s, ms(now)), p.Memory().Milliseconds(); e > at+m {
			t.Fatalf("%+v state %+v at %d: expiry %d beyond now + Memory %d", p, s, at, e, at+m)
		}
	})
	for _, tc := range []struct {
		p    algorithm.Params
		want time.Duration
	}{
		{algorithm.Params{Algorithm: algorithm.FixedWindow, Limit: 10, Window: time.Minute}, time.Minute},
		{algorithm.Params{Algorithm: algorithm.SlidingWindowLog, Limit: 10, Window: time.Second}, time.Second},
		{algorithm.Params{Algorithm: algorithm.SlidingWindowCounter, Limit: 10, Window: time.Second}, 2 * time.Second},
		{algorithm.Params{Algorithm: algorithm.TokenBucket, Limit: 10, Window: time.Second, Burst: 30}, 3 * time.Second},
		{algorithm.Params{Algorithm: algorithm.LeakyBucket, Limit: 10, Window: time.Second}, 100 * time.Millisecond},
		{algorithm.Params{Algorithm: algorithm.TokenBucket, Limit: 0, Window: time.Second}, time.Second},
	} {
		if got := tc.p.Memory(); got != tc.want {
			t.Errorf("%+v: Memory %v, want %v", tc.p, got, tc.want)
		}
		if c := tc.p.Capacity(); c > 0 {
			_, s := algorithm.Decide(tc.p, algorithm.State{}, ms(0), c)
			if e := algorithm.Expiry(tc.p, s, ms(0)) - ms(0).UnixMilli(); e != tc.want.Milliseconds() {
				t.Errorf("%+v: capacity admitted at 0 expires at %d ms, want %v", tc.p, e, tc.want)
			}
		}
	}
}

func TestLogIndex(t *testing.T) {
	p := algorithm.Params{Algorithm: algorithm.SlidingWindowLog, Limit: 3}
	tests := []struct{ count, cost, want int64 }{
		{3, 1, 0}, {3, 2, 1}, {3, 3, 2}, {3, 4, -1}, {2, 1, -1}, {0, 1, -1},
	}
	for _, tt := range tests {
		if got := algorithm.LogIndex(p, tt.count, tt.cost); got != tt.want {
			t.Errorf("LogIndex(count %d, cost %d): got %d, want %d", tt.count, tt.cost, got, tt.want)
		}
	}
}

func ExampleDecide() {
	p := algorithm.Params{Algorithm: algorithm.SlidingWindowLog, Limit: 2, Window: time.Minute}
	var s algorithm.State
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i := range 3 {
		var d algorithm.Decision
		d, s = algorithm.Decide(p, s, now.Add(time.Duration(i)*time.Second), 1)
		fmt.Println(d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// true 1 0s
	// true 0 0s
	// false 0 58s
}
