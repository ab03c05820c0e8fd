package limiter

import "testing"

func TestAdmissions(t *testing.T) {
	a := newAdmissions(1000)
	const mem = 1000
	steps := []struct {
		op        string // "add" or "used"
		key       string
		now, cost int64
		want      int64 // for used
	}{
		{"used", "k", 0, 0, 0},
		{"add", "k", 100, 3, 0},
		{"add", "k", 900, 2, 0},
		{"used", "k", 999, 0, 5},
		{"used", "other", 999, 0, 0},
		// Next bucket: the previous one weighs by what is left of it.
		{"add", "k", 1000, 1, 0},
		{"used", "k", 1000, 0, 6},
		{"used", "k", 1500, 0, 1 + 3}, // ceil(5 × 0.5)
		{"used", "k", 1999, 0, 1 + 1}, // ceil(5 × 0.001)
		{"used", "k", 2000, 0, 1},     // the bucket of 1000 is now the previous one, whole
		{"used", "k", 3000, 0, 0},     // both too old
		// A refund never takes the count below 0.
		{"add", "k", 3100, 2, 0},
		{"add", "k", 3200, -5, 0},
		{"used", "k", 3300, 0, 0},
		// A refund of a key never counted adds nothing.
		{"add", "never", 3300, -1, 0},
		{"used", "never", 3300, 0, 0},
	}
	for i, s := range steps {
		switch s.op {
		case "add":
			a.add(s.key, s.now, mem, s.cost)
		case "used":
			if got := a.used(s.key, s.now, mem); got != s.want {
				t.Errorf("step %d: used(%q, %d) = %d, want %d", i, s.key, s.now, got, s.want)
			}
		}
	}
	// Another rule memory for the same key restarts its count.
	a.add("m", 0, 1000, 4)
	if got := a.used("m", 10, 60_000); got != 0 {
		t.Errorf("used under another memory = %d, want 0", got)
	}
}

func TestAdmissionsBounded(t *testing.T) {
	a := newAdmissions(admShards * 4) // 4 per shard
	for i := range 10_000 {
		a.add(string(rune('a'+i%26))+string(rune(i)), int64(i), 1000, 1)
	}
	for i := range a.shards {
		if n := len(a.shards[i].m); n > 4 {
			t.Fatalf("shard %d holds %d keys, want at most 4", i, n)
		}
	}
}
