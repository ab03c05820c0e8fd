package usage_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/dc/quota"
	"github.com/weirhq/weir/internal/dc/usage"
	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/rulesettest"
	"github.com/weirhq/weir/internal/testkit/wait"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/store/redisstore"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// movingProgress is a Progress whose revision a meter moves on: the DC
// applies a new revision while the readings are taken.
type movingProgress struct{ rev *atomic.Int64 }

func (p movingProgress) Applied() (uint64, int64) { return 1, p.rev.Load() }

// meter is a Meter that answers from values (key "rule/key") and moves
// the revision on at every reading.
type meter struct {
	rev    *atomic.Int64
	values map[string]int64
	mu     sync.Mutex
	calls  []string
}

func (m *meter) Consumed(_ context.Context, domain, ruleID, key string) (int64, bool) {
	m.rev.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	id := ruleID + "/" + key
	m.calls = append(m.calls, id)
	v, ok := m.values[id]
	return v, ok
}

func ptr(v int64) *int64 { return &v }

// TestReporterReadings checks that a report carries the meter's readings
// of the rules and keys it holds, with the revision applied before they
// were taken, at most MaxReadings of them, and none in the report of the
// interval in progress at shutdown.
func TestReporterReadings(t *testing.T) {
	for _, tc := range []struct {
		name      string
		max       int
		wantCalls int
		want      []*weirv1.RuleUsage
	}{
		{"all", 0, 2, []*weirv1.RuleUsage{
			{Domain: "shop", RuleId: "per-user", Offered: 1, Admitted: 1, Share: 0.5,
				Keys: []*weirv1.KeyUsage{{Key: "a", Offered: 1, Admitted: 1, Limit: 100, Consumed: ptr(30)}}},
			{Domain: "shop", RuleId: "site", Offered: 1, Admitted: 1, Share: 0.5, Consumed: ptr(12)},
		}},
		{"bounded", 1, 1, []*weirv1.RuleUsage{
			{Domain: "shop", RuleId: "per-user", Offered: 1, Admitted: 1, Share: 0.5,
				Keys: []*weirv1.KeyUsage{{Key: "a", Offered: 1, Admitted: 1, Limit: 100, Consumed: ptr(30)}}},
			{Domain: "shop", RuleId: "site", Offered: 1, Admitted: 1, Share: 0.5},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := compile(t)
			agg := newAggregator(t, usage.AggregatorConfig{Shares: &recordingShares{share: 0.5}})
			rev := &atomic.Int64{}
			rev.Store(40)
			m := &meter{rev: rev, values: map[string]int64{"per-user/a": 30, "site/": 12}}
			clock := fakeclock.New(t0)
			pub := &recorder{}
			_, stop := startReporter(t, clock, usage.ReporterConfig{Source: agg, Publisher: pub, Progress: movingProgress{rev},
				Meter: m, MaxReadings: tc.max, Interval: 500 * time.Millisecond})
			feed(t, agg, set, dec{rule: "per-user", key: "a", allowed: true, remaining: 90}, dec{rule: "site", allowed: true, remaining: 9})
			clock.WaitForTimers(t, 1)
			clock.Advance(200 * time.Millisecond)
			wait.For(t, 5*time.Second, "first report", func() bool { return pub.count() == 1 })
			feed(t, agg, set, dec{rule: "site", allowed: true, remaining: 9})
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			got := pub.reports(t)
			if len(got) != 2 {
				t.Fatalf("got %d reports, want 2", len(got))
			}
			if r := got[0].GetAppliedRevision(); r != 40 {
				t.Errorf("applied revision %d, want 40: the one before the readings", r)
			}
			sortRules(got[0].Rules)
			for i, w := range tc.want {
				if i >= len(got[0].Rules) || !proto.Equal(got[0].Rules[i], w) {
					t.Errorf("rule %d:\n got %v\nwant %v", i, got[0].Rules, w)
				}
			}
			for _, ru := range got[1].GetRules() {
				if ru.Consumed != nil {
					t.Errorf("shutdown report: rule %s has a reading %d, want none", ru.GetRuleId(), ru.GetConsumed())
				}
			}
			if len(m.calls) != tc.wantCalls {
				t.Errorf("meter called %d times (%v), want %d", len(m.calls), m.calls, tc.wantCalls)
			}
		})
	}
}

// TestReporterReadsQuietEntries checks that an entry read as holding
// quota is read again in the reports of intervals without its traffic —
// what it holds ages out of the window, and the coordinator must hear it
// — through a failed reading, until a reading finds it empty, which is
// reported once. A quiet key goes without a limit: the coordinator keeps
// the one it has.
func TestReporterReadsQuietEntries(t *testing.T) {
	set := compile(t)
	agg := newAggregator(t, usage.AggregatorConfig{Shares: &recordingShares{share: 0.5}})
	rev := &atomic.Int64{}
	m := &meter{rev: rev, values: map[string]int64{"per-user/a": 30, "site/": 12}}
	clock := fakeclock.New(t0)
	pub := &recorder{}
	_, stop := startReporter(t, clock, usage.ReporterConfig{Source: agg, Publisher: pub, Progress: movingProgress{rev},
		Meter: m, Interval: 500 * time.Millisecond})
	feed(t, agg, set, dec{rule: "per-user", key: "a", allowed: true, remaining: 90}, dec{rule: "site", allowed: true, remaining: 9})
	next := func(n int, set func()) { t.Helper(); nextReport(t, clock, 500*time.Millisecond, m, pub, n, set) }
	next(1, nil)
	next(2, func() { m.values["site/"] = 7; delete(m.values, "per-user/a") }) // a's reading fails
	next(3, func() { m.values["site/"] = 0; m.values["per-user/a"] = 20 })
	next(4, func() { m.values["per-user/a"] = 0 })
	next(5, nil)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := pub.reports(t)
	want := [][]*weirv1.RuleUsage{
		2: {{Domain: "shop", RuleId: "site", Consumed: ptr(7)}},
		3: {{Domain: "shop", RuleId: "per-user", Keys: []*weirv1.KeyUsage{{Key: "a", Consumed: ptr(20)}}},
			{Domain: "shop", RuleId: "site", Consumed: ptr(0)}},
		4: {{Domain: "shop", RuleId: "per-user", Keys: []*weirv1.KeyUsage{{Key: "a", Consumed: ptr(0)}}}},
		5: nil,
	}
	checkReports(t, got, want, 2)
}

// nextReport lets the reporter's next interval (of length interval) end, after set (if any)
// changed the meter's values, and waits for its report, the n-th.
func nextReport(t *testing.T, clock *fakeclock.Clock, interval time.Duration, m *meter, pub *recorder, n int, set func()) {
	t.Helper()
	clock.WaitForTimers(t, 1)
	if set != nil {
		m.mu.Lock()
		set()
		m.mu.Unlock()
	}
	clock.Advance(interval)
	wait.For(t, 5*time.Second, fmt.Sprintf("report %d", n), func() bool { return pub.count() == n })
}

// checkReports compares the rules of reports first… to want[first…]
// (want is indexed by report number, from 1), in rule order.
func checkReports(t *testing.T, got []*weirv1.UsageReport, want [][]*weirv1.RuleUsage, first int) {
	t.Helper()
	for n := first; n < len(want); n++ {
		rules := got[n-1].GetRules()
		sortRules(rules)
		if len(rules) != len(want[n]) {
			t.Errorf("report %d: got %v, want %v", n, rules, want[n])
			continue
		}
		for i := range rules {
			if !proto.Equal(rules[i], want[n][i]) {
				t.Errorf("report %d rule %d:\n got %v\nwant %v", n, i, rules[i], want[n][i])
			}
		}
	}
}

func sortRules(rs []*weirv1.RuleUsage) {
	for i := range rs {
		for j := i + 1; j < len(rs); j++ {
			if rs[j].GetRuleId() < rs[i].GetRuleId() {
				rs[i], rs[j] = rs[j], rs[i]
			}
		}
	}
}

// TestLimiterMeterRedis reads, through a limiter on a real redis-server,
// what was admitted of global rules of every window algorithm, of a rule
// and of keys, with room left or none, and of buckets (in units of the
// limit); a keyed rule's own entry goes without a reading.
func TestLimiterMeterRedis(t *testing.T) {
	const yaml = `
domain: api
rules:
  - {rule_id: log, key_type: l, limit: 50, window_seconds: 60, algorithm: SlidingWindowLog}
  - {rule_id: fixed, key_type: f, limit: 50, window_seconds: 3600, algorithm: FixedWindow}
  - {rule_id: counter, key_type: c, limit: 50, window_seconds: 60, algorithm: SlidingWindowCounter}
  - {rule_id: bucket, key_type: b, limit: 50, window_seconds: 60, algorithm: TokenBucket}
  - {rule_id: leaky, key_type: lb, limit: 60, window_seconds: 60, algorithm: LeakyBucket, burst: 10}
  - {rule_id: site, limit: 1000, window_seconds: 86400, algorithm: SlidingWindowLog, conditions: {site: "yes"}}
`
	srv := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rc.Close()
	rs, err := redisstore.New(rc, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// Generous store timeouts: on a loaded machine a decision that went to
	// a failure mode would be admitted without the store counting it.
	l, err := limiter.New(limiter.Config{Store: rs, CacheKeys: -1, StoreTimeout: 5 * time.Second, StoreTimeoutMax: 5 * time.Second,
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.SetRules(rulesettest.Compile(t, yaml)); err != nil {
		t.Fatal(err)
	}
	admit := func(attr, val string, n int) int64 {
		admitted := int64(0)
		for range n {
			resp, err := l.Check(context.Background(), limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{attr: val}}}})
			if err != nil {
				t.Fatal(err)
			}
			if r := resp.Items[0].Results[0]; r.Source != limiter.SourceStore {
				t.Fatalf("decided by %v, want the store", r.Source)
			}
			if resp.Allowed {
				admitted++
			}
		}
		return admitted
	}
	var m usage.LimiterMeter
	if _, ok := m.Consumed(context.Background(), "api", "log", "x"); ok {
		t.Fatal("a meter without a limiter read something")
	}
	m.SetLimiter(l)
	type want struct {
		v  int64
		ok bool
	}
	cases := []struct {
		rule, attr, key string
		n               int
		want            func(admitted int64) want
	}{
		{"log", "l", "x", 7, func(a int64) want { return want{a, true} }},
		{"fixed", "f", "x", 9, func(a int64) want { return want{a, true} }},
		{"counter", "c", "x", 11, func(a int64) want { return want{a, true} }},
		{"log", "l", "untouched", 0, func(int64) want { return want{0, true} }},
		{"log", "l", "full", 60, func(a int64) want { return want{a, true} }},
		{"bucket", "b", "x", 5, func(a int64) want { return want{a, true} }},
		{"bucket", "b", "full", 60, func(a int64) want { return want{a, true} }},
		// 4 of a capacity of 10 at 60 per minute: in units of the limit.
		{"leaky", "lb", "x", 4, func(a int64) want { return want{a * 6, true} }},
		{"site", "site", "", 13, func(a int64) want { return want{a, true} }},
		{"log", "", "", 0, func(int64) want { return want{0, false} }},
	}
	t.Run("MinMemory", func(t *testing.T) {
		short := usage.LimiterMeter{MinMemory: time.Minute}
		short.SetLimiter(l)
		admit("f", "short", 3)
		if v, ok := short.Consumed(context.Background(), "api", "log", "x"); ok {
			t.Errorf("a rule of 60 s with MinMemory 1m: Consumed = %d, true; want no reading", v)
		}
		if v, ok := short.Consumed(context.Background(), "api", "fixed", "short"); v != 3 || !ok {
			t.Errorf("a rule of 1 h with MinMemory 1m: Consumed = %d, %v; want 3, true", v, ok)
		}
	})
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%q", tc.rule, tc.key), func(t *testing.T) {
			val := tc.key
			if tc.rule == "site" {
				val = "yes"
			}
			a := int64(0)
			if tc.n > 0 {
				a = admit(tc.attr, val, tc.n)
			}
			w := tc.want(a)
			v, ok := m.Consumed(context.Background(), "api", tc.rule, tc.key)
			if v != w.v || ok != w.ok {
				t.Errorf("Consumed = %d, %v after %d admitted; want %d, %v", v, ok, a, w.v, w.ok)
			}
		})
	}
}

// TestReporterReadsChangedEntries: an entry whose limits the DC's
// documents change — every entry of the first listing, a key newly given a
// share of its own, a key given a new limit — is read in every report for
// ChangedReads, traffic or not, then while it holds quota; one without a
// reading (its rule's readings off) is dropped at once. The changes come
// from a real quota.Table.
func TestReporterReadsChangedEntries(t *testing.T) {
	agg := newAggregator(t, usage.AggregatorConfig{Shares: &recordingShares{share: 0.5}})
	rev := &atomic.Int64{}
	m := &meter{rev: rev, values: map[string]int64{"per-user/k": 30}}
	tb, err := quota.New(quota.Config{DC: "a", DCs: []string{"a", "b"}, TrackChanges: true})
	if err != nil {
		t.Fatal(err)
	}
	doc := func(rev int64, share float64, keys ...string) quota.Change {
		a := &quota.Assignment{DC: "a", Domain: "shop", RuleID: "per-user", Share: 0.5}
		for _, k := range keys {
			a.Keys = append(a.Keys, quota.KeyShare{Key: k, Share: share})
		}
		return quota.Change{Domain: "shop", RuleID: "per-user", Revision: rev, Assignment: a}
	}
	tb.Reset(5, []quota.Change{doc(5, 0.1, "k", "short")})
	const interval = 700 * time.Millisecond
	owed := int((usage.ChangedReads + interval - 1) / interval) // 3 s in reports of 700 ms: 5
	clock := fakeclock.New(t0)
	pub := &recorder{}
	_, stop := startReporter(t, clock, usage.ReporterConfig{Source: agg, Publisher: pub, Progress: movingProgress{rev},
		Meter: m, Changed: tb, Interval: interval})
	n := 0
	next := func(set func()) { t.Helper(); n++; nextReport(t, clock, interval, m, pub, n, set) }
	next(nil) // k read 30
	next(func() { m.values["per-user/k"] = 0 })
	for range owed - 1 {
		next(nil)
	}
	// Then a new limit for k and a new key k2 (read empty).
	next(func() { m.values["per-user/k2"] = 0; tb.Apply(6, []quota.Change{doc(6, 0.2, "k", "short", "k2")}) })
	for range owed + 1 {
		next(nil)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	keys := func(r *weirv1.UsageReport) string {
		var out []string
		for _, ru := range r.GetRules() {
			for _, k := range ru.GetKeys() {
				out = append(out, fmt.Sprintf("%s=%d", k.GetKey(), k.GetConsumed()))
			}
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	// Read in the owed reports and once more, empty, then forgotten.
	want := []string{"k=30"}
	for range owed {
		want = append(want, "k=0")
	}
	for range owed + 1 {
		want = append(want, "k2=0 k=0")
	}
	want = append(want, "", "") // forgotten: reports without them (not the shutdown report)
	got := pub.reports(t)
	if len(got) < len(want) {
		t.Fatalf("%d reports, want %d", len(got), len(want))
	}
	for i, w := range want {
		if g := keys(got[i]); g != w {
			t.Errorf("report %d: keys %q, want %q", i+1, g, w)
		}
	}
	// short and the keyed rule's own entry have no reading: read once per
	// listing that changed them.
	calls := map[string]int{}
	for _, c := range m.calls {
		calls[c]++
	}
	if calls["per-user/short"] != 2 || calls["per-user/"] != 1 {
		t.Errorf("meter calls %v: want short read twice and the rule's own entry once", calls)
	}
}

// TestChangedEntriesGiveWayToHeldQuota: entries kept only for the reads a
// change owes them do not crowd out an entry that holds quota: with room
// for three, filled by a listing of five keys, key a read holding 30 takes
// the place of one of them and is read in every report while quiet.
func TestChangedEntriesGiveWayToHeldQuota(t *testing.T) {
	set := compile(t)
	agg := newAggregator(t, usage.AggregatorConfig{Shares: &recordingShares{share: 0.5}})
	rev := &atomic.Int64{}
	m := &meter{rev: rev, values: map[string]int64{"per-user/a": 30, "per-user/": 0, "per-user/c1": 0, "per-user/c2": 0, "per-user/c3": 0, "per-user/c4": 0, "per-user/c5": 0}}
	tb, err := quota.New(quota.Config{DC: "a", DCs: []string{"a", "b"}, TrackChanges: true})
	if err != nil {
		t.Fatal(err)
	}
	a := &quota.Assignment{DC: "a", Domain: "shop", RuleID: "per-user", Share: 0.5}
	for _, k := range []string{"c1", "c2", "c3", "c4", "c5"} {
		a.Keys = append(a.Keys, quota.KeyShare{Key: k, Share: 0.1})
	}
	tb.Reset(5, []quota.Change{{Domain: "shop", RuleID: "per-user", Revision: 5, Assignment: a}})
	clock := fakeclock.New(t0)
	pub := &recorder{}
	_, stop := startReporter(t, clock, usage.ReporterConfig{Source: agg, Publisher: pub, Progress: movingProgress{rev},
		Meter: m, Changed: tb, MaxReadings: 3, Interval: 500 * time.Millisecond})
	nextReport(t, clock, 500*time.Millisecond, m, pub, 1, nil) // the listing's changes fill the room
	feed(t, agg, set, dec{rule: "per-user", key: "a", allowed: true, remaining: 90})
	for n := 2; n <= 5; n++ {
		nextReport(t, clock, 500*time.Millisecond, m, pub, n, nil)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := pub.reports(t)
	for n := 3; n <= 5; n++ {
		found := false
		for _, ru := range got[n-1].GetRules() {
			for _, k := range ru.GetKeys() {
				if k.GetKey() == "a" && k.GetConsumed() == 30 {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("report %d: %v; want key a read holding 30", n, got[n-1].GetRules())
		}
	}
}

// TestReporterReadsBetween: with ReadsBetween 3 the entries the DC holds
// quota of while quiet are read a quarter, half and three quarters into
// each interval and sent alone (readings_only, labelled with the interval
// in progress and the time read); entries read with traffic in the last
// interval are not, nor is anything sent when no entry is held quietly;
// an entry the interval report found empty is read no more.
func TestReporterReadsBetween(t *testing.T) {
	set := compile(t)
	agg := newAggregator(t, usage.AggregatorConfig{Shares: &recordingShares{share: 0.5}})
	rev := &atomic.Int64{}
	m := &meter{rev: rev, values: map[string]int64{"per-user/a": 30, "site/": 12}}
	clock := fakeclock.New(t0) // 12:00:00.300
	pub := &recorder{}
	const iv = 400 * time.Millisecond
	_, stop := startReporter(t, clock, usage.ReporterConfig{Source: agg, Publisher: pub, Progress: movingProgress{rev},
		Meter: m, Interval: iv, ReadsBetween: 3})
	feed(t, agg, set, dec{rule: "per-user", key: "a", allowed: true, remaining: 90}, dec{rule: "site", allowed: true, remaining: 9})
	// step sets the meter's values, lets 100 ms pass and waits for the
	// reporter to have sent n messages in all.
	step := func(n int, values map[string]int64) {
		t.Helper()
		clock.WaitForTimers(t, 1)
		m.mu.Lock()
		maps.Copy(m.values, values)
		m.mu.Unlock()
		clock.Advance(100 * time.Millisecond)
		wait.For(t, 5*time.Second, fmt.Sprintf("message %d", n), func() bool { return pub.count() == n })
	}
	step(1, nil) // .400: the interval report, both entries with traffic
	step(1, nil) // .500, .600, .700: nothing held quietly
	step(1, nil)
	step(1, nil)
	step(2, nil)                                            // .800: no traffic; both read quiet
	step(3, map[string]int64{"site/": 9})                   // .900
	step(4, map[string]int64{"site/": 5, "per-user/a": 25}) // 1.000
	step(5, map[string]int64{"site/": 0})                   // 1.100
	step(6, nil)                                            // 1.200: the interval report finds site empty
	step(7, map[string]int64{"site/": 4, "per-user/a": 20}) // 1.300: site is read no more
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := pub.reports(t)
	start := t0.Truncate(time.Second).Add(800 * time.Millisecond).UnixMilli()
	for i, want := range []struct {
		n        int // message, from 1
		startMs  int64
		ms       int64
		readings bool
	}{
		{3, start, 100, true}, {4, start, 200, true}, {5, start, 300, true},
		{6, start, 400, false}, {7, start + 400, 100, true},
	} {
		r := got[want.n-1]
		if r.GetReadingsOnly() != want.readings || r.GetIntervalStartMs() != want.startMs || r.GetIntervalMs() != want.ms {
			t.Errorf("case %d: message %d readings only %v, interval %d+%d ms; want %v, %d+%d", i, want.n,
				r.GetReadingsOnly(), r.GetIntervalStartMs(), r.GetIntervalMs(), want.readings, want.startMs, want.ms)
		}
	}
	a := func(v int64) *weirv1.RuleUsage {
		return &weirv1.RuleUsage{Domain: "shop", RuleId: "per-user", Keys: []*weirv1.KeyUsage{{Key: "a", Consumed: ptr(v)}}}
	}
	site := func(v int64) *weirv1.RuleUsage {
		return &weirv1.RuleUsage{Domain: "shop", RuleId: "site", Consumed: ptr(v)}
	}
	checkReports(t, got, [][]*weirv1.RuleUsage{
		3: {a(30), site(9)},
		4: {a(25), site(5)},
		5: {a(25), site(0)},
		6: {a(25), site(0)},
		7: {a(20)},
	}, 3)
}
