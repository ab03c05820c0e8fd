package topk_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/weirhq/weir/internal/dc/usage/topk"
)

func mustNew(t testing.TB, k int) *topk.Sketch {
	t.Helper()
	s, err := topk.New(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type add struct {
	key string
	n   uint64
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    int
		ok   bool
	}{
		{"zero", 0, false},
		{"negative", -1, false},
		{"one", 1, true},
		{"max", topk.MaxK, true},
		{"too many", topk.MaxK + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := topk.New(tc.k)
			if tc.ok {
				if err != nil || s.K() != tc.k {
					t.Fatalf("New(%d) = %v, %v; want a sketch with K %d", tc.k, s, err, tc.k)
				}
				return
			}
			if !errors.Is(err, topk.ErrInvalidK) {
				t.Fatalf("New(%d) error = %v, want ErrInvalidK", tc.k, err)
			}
		})
	}
}

func TestSketch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		k     int
		adds  []add
		want  []topk.Entry
		min   uint64
		total uint64
	}{
		{
			name: "empty",
			k:    3,
		},
		{
			name:  "exact while not full",
			k:     3,
			adds:  []add{{"a", 1}, {"b", 5}, {"a", 2}, {"c", 1}},
			want:  []topk.Entry{{"b", 5, 0}, {"a", 3, 0}, {"c", 1, 0}},
			min:   1,
			total: 9,
		},
		{
			name:  "zero weight is ignored",
			k:     2,
			adds:  []add{{"a", 0}, {"b", 2}},
			want:  []topk.Entry{{"b", 2, 0}},
			total: 2,
		},
		{
			name: "new key displaces the smallest",
			k:    2,
			adds: []add{{"a", 5}, {"b", 2}, {"c", 1}},
			// c inherits b's 2 as its error.
			want:  []topk.Entry{{"a", 5, 0}, {"c", 3, 2}},
			min:   3,
			total: 8,
		},
		{
			name: "displaced key comes back with the minimum as error",
			k:    2,
			adds: []add{{"a", 5}, {"b", 2}, {"c", 1}, {"b", 4}},
			// b displaces c (3): 3+4 with error 3.
			want:  []topk.Entry{{"b", 7, 3}, {"a", 5, 0}},
			min:   5,
			total: 12,
		},
		{
			name:  "one counter",
			k:     1,
			adds:  []add{{"a", 1}, {"b", 1}, {"a", 1}},
			want:  []topk.Entry{{"a", 3, 2}},
			min:   3,
			total: 3,
		},
		{
			name:  "ties sort by key",
			k:     4,
			adds:  []add{{"d", 1}, {"b", 1}, {"c", 2}, {"a", 1}},
			want:  []topk.Entry{{"c", 2, 0}, {"a", 1, 0}, {"b", 1, 0}, {"d", 1, 0}},
			min:   1,
			total: 5,
		},
		{
			name:  "empty key and long key",
			k:     2,
			adds:  []add{{"", 3}, {string(make([]byte, 5000)), 2}},
			want:  []topk.Entry{{"", 3, 0}, {string(make([]byte, 5000)), 2, 0}},
			min:   2,
			total: 5,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, tc.k)
			for _, a := range tc.adds {
				s.Add(a.key, a.n)
			}
			got := s.Top(nil)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Top = %v, want %v", got, tc.want)
			}
			if s.Len() != len(tc.want) {
				t.Errorf("Len = %d, want %d", s.Len(), len(tc.want))
			}
			if s.Min() != tc.min {
				t.Errorf("Min = %d, want %d", s.Min(), tc.min)
			}
			if s.Total() != tc.total {
				t.Errorf("Total = %d, want %d", s.Total(), tc.total)
			}
			for _, w := range tc.want {
				if e, ok := s.Count(w.Key); !ok || e != w {
					t.Errorf("Count(%.10q) = %v, %t; want %v, true", w.Key, e, ok, w)
				}
			}
			if e, ok := s.Count("not added"); ok {
				t.Errorf("Count of a key never added = %v, true; want false", e)
			}
		})
	}
}

func TestReset(t *testing.T) {
	s := mustNew(t, 2)
	for _, k := range []string{"a", "b", "c", "a"} {
		s.Add(k, 1)
	}
	s.Reset()
	if s.Len() != 0 || s.Total() != 0 || s.Min() != 0 || len(s.Top(nil)) != 0 {
		t.Fatalf("after Reset: Len %d, Total %d, Min %d, Top %v; want all empty", s.Len(), s.Total(), s.Min(), s.Top(nil))
	}
	if _, ok := s.Count("a"); ok {
		t.Fatal("Count(a) after Reset found it")
	}
	s.Add("x", 2)
	s.Add("a", 1)
	want := []topk.Entry{{"x", 2, 0}, {"a", 1, 0}}
	if got := s.Top(nil); !slices.Equal(got, want) {
		t.Fatalf("Top after Reset and Adds = %v, want %v", got, want)
	}
}

func TestTopAppends(t *testing.T) {
	s := mustNew(t, 2)
	s.Add("a", 1)
	dst := []topk.Entry{{"kept", 9, 0}}
	got := s.Top(dst)
	want := []topk.Entry{{"kept", 9, 0}, {"a", 1, 0}}
	if !slices.Equal(got, want) {
		t.Fatalf("Top(dst) = %v, want %v", got, want)
	}
}

func TestAddDoesNotRetainKey(t *testing.T) {
	s := mustNew(t, 2)
	b := []byte("abc")
	s.Add(string(b), 1) // string(b) is a copy, but check the Sketch's own copy too
	b[0] = 'x'
	if _, ok := s.Count("abc"); !ok {
		t.Fatal("Count(abc) not found after the caller's buffer changed")
	}
}

// TestProperties checks the Space-Saving guarantees against exact counts
// on streams of several shapes.
func TestProperties(t *testing.T) {
	type stream struct {
		name string
		gen  func(r *rand.Rand) add
	}
	zipf := func(s float64, keys uint64, maxN uint64) func(r *rand.Rand) add {
		var z *rand.Zipf
		return func(r *rand.Rand) add {
			if z == nil {
				z = rand.NewZipf(r, s, 1, keys-1)
			}
			return add{strconv.FormatUint(z.Uint64(), 10), 1 + r.Uint64N(maxN)}
		}
	}
	streams := []stream{
		{"zipf 1.1 unit", zipf(1.1, 10_000, 1)},
		{"zipf 1.5 weighted", zipf(1.5, 100_000, 50)},
		{"uniform over many", func(r *rand.Rand) add { return add{strconv.Itoa(r.IntN(5000)), 1} }},
		{"uniform over few", func(r *rand.Rand) add { return add{strconv.Itoa(r.IntN(10)), 1 + r.Uint64N(3)} }},
		{"one elephant in a long tail", func(r *rand.Rand) add {
			if r.IntN(10) == 0 {
				return add{"elephant", 1}
			}
			return add{"mouse-" + strconv.Itoa(r.IntN(1_000_000)), 1}
		}},
	}
	for _, st := range streams {
		for _, k := range []int{1, 8, 64, 256} {
			for seed := range uint64(3) {
				t.Run(fmt.Sprintf("%s/k=%d/seed=%d", st.name, k, seed), func(t *testing.T) {
					r := rand.New(rand.NewPCG(seed, uint64(k)))
					s := mustNew(t, k)
					exact := map[string]uint64{}
					var total uint64
					gen := st.gen
					for range 20_000 {
						a := gen(r)
						s.Add(a.key, a.n)
						exact[a.key] += a.n
						total += a.n
					}
					checkGuarantees(t, s, exact, total)
				})
			}
		}
	}
}

func checkGuarantees(t *testing.T, s *topk.Sketch, exact map[string]uint64, total uint64) {
	t.Helper()
	if s.Total() != total {
		t.Fatalf("Total = %d, want %d", s.Total(), total)
	}
	top := s.Top(nil)
	var sum uint64
	monitored := map[string]bool{}
	for _, e := range top {
		sum += e.Count
		monitored[e.Key] = true
		truth := exact[e.Key]
		if e.Count < truth {
			t.Errorf("key %q: Count %d undercounts the true %d", e.Key, e.Count, truth)
		}
		if e.Guaranteed() > truth {
			t.Errorf("key %q: Count %d - Err %d = %d exceeds the true %d", e.Key, e.Count, e.Err, e.Guaranteed(), truth)
		}
	}
	if len(exact) >= s.K() && sum != total {
		t.Errorf("sum of counts = %d, want the total %d", sum, total)
	}
	if s.Min()*uint64(s.K()) > total {
		t.Errorf("Min %d exceeds Total/K = %d/%d", s.Min(), total, s.K())
	}
	for key, truth := range exact {
		if monitored[key] {
			continue
		}
		if truth*uint64(s.K()) > total {
			t.Errorf("key %q with true count %d > N/K = %d/%d is not monitored", key, truth, total, s.K())
		}
		if truth > s.Min() {
			t.Errorf("key %q not monitored has true count %d > Min %d", key, truth, s.Min())
		}
	}
}

func TestAddAllocatesNothingOnceWarm(t *testing.T) {
	s := mustNew(t, 64)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	for _, k := range keys {
		s.Add(k, 1)
	}
	i := 0
	allocs := testing.AllocsPerRun(10_000, func() {
		s.Add(keys[i%len(keys)], 1)
		i += 7
	})
	if allocs != 0 {
		t.Fatalf("Add allocates %.2f times per call, want 0", allocs)
	}
}
