package limiter

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

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

// sameShard returns n key names that fall in one shard of a.
func sameShard(a *admissions, n int) []string {
	first, _ := a.shard("k0")
	keys := []string{"k0"}
	for i := 1; len(keys) < n; i++ {
		k := "k" + strconv.Itoa(i)
		if sh, _ := a.shard(k); sh == first {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestAdmissionsEvicts fills a table of one set (admWays slots) and
// checks which count a new key takes the place of: one whose counts no
// longer matter first, then the one whose bucket started first; the
// counts of the keys that stay are kept whole.
func TestAdmissionsEvicts(t *testing.T) {
	const mem = 1000
	a := newAdmissions(1) // one set a shard
	keys := sameShard(a, admWays+3)
	sh, _ := a.shard(keys[0])
	if len(sh.tags) != admWays {
		t.Fatalf("a table for 1 key has %d slots a shard, want %d", len(sh.tags), admWays)
	}
	// keys[0] counted in the bucket of 1000, the others in the bucket of
	// 2000 (a count of i for keys[i]): the set is full.
	a.add(keys[0], 1500, mem, 1)
	for i := 1; i < admWays; i++ {
		a.add(keys[i], 2500, mem, int64(i))
	}
	if got := a.used(keys[0], 2900, mem); got != 1 {
		t.Fatalf("used(%s) at 2900 = %d, want 1", keys[0], got)
	}
	newcomers := keys[admWays:]
	// At 3000 keys[0]'s counts no longer matter: the first newcomer takes
	// its slot.
	a.add(newcomers[0], 3000, mem, 7)
	for i := 1; i < admWays; i++ {
		if got := a.used(keys[i], 3000, mem); got != int64(i) {
			t.Errorf("used(%s) at 3000 = %d, want %d", keys[i], got, i)
		}
	}
	if got := a.used(newcomers[0], 3000, mem); got != 7 {
		t.Errorf("used(%s) at 3000 = %d, want 7", newcomers[0], got)
	}
	// From now on every count matters: newcomers take the places of keys
	// counted in the bucket of 2000, never the first newcomer's (of 3000),
	// and one each.
	a.add(newcomers[1], 3100, mem, 5)
	a.add(newcomers[2], 3200, mem, 1)
	for i, want := range []int64{7, 5, 1} {
		if got := a.used(newcomers[i], 3200, mem); got != want {
			t.Errorf("used(%s) at 3200 = %d, want %d", newcomers[i], got, want)
		}
	}
	kept := 0
	for i := 1; i < admWays; i++ {
		// Counted in the bucket before 3000's, weighed by 0.8 at 3200.
		switch got := a.used(keys[i], 3200, mem); got {
		case int64(math.Ceil(float64(i) * 0.8)):
			kept++
		case 0:
		default:
			t.Errorf("used(%s) = %d, want %d or forgotten", keys[i], got, i)
		}
	}
	if kept != admWays-3 {
		t.Errorf("%d of the %d keys of the bucket of 2000 kept, want %d", kept, admWays-1, admWays-3)
	}
	// A refund of a key not in the table takes no slot.
	before := append([]uint64(nil), sh.tags...)
	a.add("absent", 3300, mem, -3)
	for i := range before {
		if sh.tags[i] != before[i] {
			t.Fatalf("a refund of an absent key changed slot %d", i)
		}
	}
}

// TestAdmissionsHome checks that a new key takes its home slot when it
// is free, or when the count there no longer matters (which frees no slot:
// the table's count of used slots stays), and that two keys with one home
// keep their own counts: the second takes another slot, and neither's
// count goes to the other. The keys are in a set other than a table's
// first, and their home is not their set's first slot, which a new key
// would take were homes ignored.
func TestAdmissionsHome(t *testing.T) {
	const mem = 1000
	a := newAdmissions(100_000)
	sh0, _ := a.shard("k0")
	for i := range a.shards {
		a.shards[i].rebuild(16, a.maxSets, 0) // 16 sets a shard
	}
	type placed struct{ set, home int }
	byPlace := map[placed][]string{}
	var keys []string
	for i := 0; keys == nil; i++ {
		k := "k" + strconv.Itoa(i)
		sh, tag := a.shard(k)
		if sh != sh0 {
			continue
		}
		f, h := sh.first(tag), sh.home(tag)
		if f == 0 || h == f {
			continue
		}
		p := placed{f, h}
		if byPlace[p] = append(byPlace[p], k); len(byPlace[p]) == 3 {
			keys = byPlace[p]
		}
	}
	sh, tag := a.shard(keys[0])
	h := sh.home(tag)
	used := sh.used
	a.add(keys[0], 100, mem, 2)
	if sh.tags[h] != tag {
		t.Fatalf("%s is not in its home slot %d: set %x", keys[0], h, sh.tags[sh.first(tag):sh.first(tag)+admWays])
	}
	for range 3 {
		a.add(keys[1], 200, mem, 5)
	}
	a.add(keys[0], 300, mem, 1)
	for k, want := range map[string]int64{keys[0]: 3, keys[1]: 15} {
		if got := a.used(k, 400, mem); got != want {
			t.Errorf("used(%s) = %d, want %d", k, got, want)
		}
	}
	if sh.used != used+2 {
		t.Errorf("%d slots used after two new keys, want %d", sh.used, used+2)
	}
	// At 5000 keys[0]'s counts no longer matter: keys[2] takes its home
	// back from it.
	used = sh.used
	_, tag2 := a.shard(keys[2])
	a.add(keys[2], 5000, mem, 4)
	if sh.tags[h] != tag2 || sh.used != used {
		t.Errorf("after a new key at a stale home: slot %d holds %x, want %s's %x; %d slots used, want %d", h, sh.tags[h], keys[2], tag2, sh.used, used)
	}
	if got := a.used(keys[2], 5000, mem); got != 4 {
		t.Errorf("used(%s) = %d, want 4", keys[2], got)
	}
}

// TestAdmissionsGrow counts keys into tables that start small: below the
// cap they grow rather than forget any count, and they do not keep growing
// for keys whose counts no longer matter; at the cap they stay within
// twice maxKeys slots.
func TestAdmissionsGrow(t *testing.T) {
	// n keys put about 384 in each shard: between a quarter and a half of
	// 1,024 slots in every shard, far from where a table doubles.
	const mem, maxKeys, n = 1000, 100_000, 24_576
	a := newAdmissions(maxKeys)
	sizes := func(a *admissions) (each []int, total int) {
		for i := range a.shards {
			each = append(each, len(a.shards[i].tags))
			total += len(a.shards[i].tags)
		}
		return each, total
	}
	_, start := sizes(a)
	for i := range n {
		a.add("a"+strconv.Itoa(i), 100, mem, 2)
	}
	lost := 0
	for i := range n {
		if a.used("a"+strconv.Itoa(i), 100, mem) != 2 {
			lost++
		}
	}
	grown, total := sizes(a)
	t.Logf("%d slots at first, %d for %d keys", start, total, n)
	if lost > 0 {
		t.Errorf("%d of %d counts forgotten below the cap, want none", lost, n)
	}
	if total < 2*n || total > 8*n {
		t.Errorf("%d slots for %d keys, want 2 to 8 times as many", total, n)
	}
	// Four more rounds of as many new keys, each once the counts before no
	// longer matter: the tables drop the stale counts rather than grow for
	// them. (Kept, five rounds of keys would take 4 times the slots of one
	// round; a table may double early, when stale slots reused kept it
	// below half full until more than a quarter held counts that matter.)
	for round := 1; round <= 4; round++ {
		for i := range n {
			a.add("r"+strconv.Itoa(round)+"-"+strconv.Itoa(i), int64(round)*100_000, mem, 1)
		}
	}
	after, _ := sizes(a)
	for i := range after {
		if after[i] > 2*grown[i] {
			t.Errorf("shard %d: %d slots after four more rounds of keys, want at most %d (twice one round's)", i, after[i], 2*grown[i])
		}
	}
	// Never more than twice maxKeys slots, rounded up to a power of two
	// sets a shard.
	for i := range 4 * maxKeys {
		a.add("c"+strconv.Itoa(i), 200_000, mem, 1)
	}
	if _, got := sizes(a); got != admShards*a.maxSets*admWays || got > 4*maxKeys {
		t.Errorf("%d slots after %d keys, want the cap %d (at most 4 × %d)", got, 4*maxKeys, admShards*a.maxSets*admWays, maxKeys)
	}
}

// BenchmarkAdmissionsAdd counts admissions over 100,000 keys in random
// order at the default capacity, as a limiter under load over many keys
// does: the cost is mostly the memory the keys' counts live in.
func BenchmarkAdmissionsAdd(b *testing.B) {
	const keys = 100_000
	a := newAdmissions(100_000)
	names := make([]string, keys)
	for i := range names {
		names[i] = "bench_under_user_id_" + strconv.Itoa(i)
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(keys)
	b.ResetTimer()
	for i := range b.N {
		a.add(names[order[i%keys]], int64(i/100), 1000, 1)
	}
	b.StopTimer()
	// The share of the keys held that sit in their home slot, where add
	// loads their count alongside the set's hashes.
	held, home := 0, 0
	for i := range a.shards {
		sh := &a.shards[i]
		for j, tag := range sh.tags {
			if tag != 0 {
				held++
				if sh.home(tag) == j {
					home++
				}
			}
		}
	}
	b.ReportMetric(float64(home)/float64(max(held, 1)), "home-share")
}
