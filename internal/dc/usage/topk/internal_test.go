package topk

import (
	"hash/maphash"
	"testing"
)

// TestCollision forces two keys onto one hash: the newcomer takes the
// counter over as if it were the smallest, so its count still bounds its
// true count from above.
func TestCollision(t *testing.T) {
	s, err := New(4)
	if err != nil {
		t.Fatal(err)
	}
	s.Add("a", 5)
	s.Add("z", 1)
	// Pretend "b" hashes as "a" does.
	i := s.index[maphash.String(s.seed, "a")]
	s.index[maphash.String(s.seed, "b")] = i
	delete(s.index, maphash.String(s.seed, "a"))
	s.entries[i].hash = maphash.String(s.seed, "b")

	s.Add("b", 2)
	e, ok := s.Count("b")
	if !ok || e.Count != 7 || e.Err != 5 {
		t.Fatalf("Count(b) = %v, %t; want {b 7 5}, true", e, ok)
	}
	if _, ok := s.Count("a"); ok {
		t.Fatal("a is still monitored after b took its counter")
	}
	if got := s.Min(); got != 0 {
		t.Fatalf("Min = %d with 2 of 4 counters used, want 0", got)
	}
	top := s.Top(nil)
	if len(top) != 2 || top[0].Key != "b" || top[1].Key != "z" {
		t.Fatalf("Top = %v, want b then z", top)
	}
}
