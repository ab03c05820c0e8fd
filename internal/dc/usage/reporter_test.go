package usage_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/dc/usage"
	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/internal/testkit/leakcheck"
	"github.com/weirhq/weir/internal/testkit/wait"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// recorder is a Publisher that records what it publishes; fail, when set,
// decides whether a call fails, and block makes calls wait for their
// context.
type recorder struct {
	mu    sync.Mutex
	msgs  []usage.Message
	calls int
	fail  func(call int) bool
	block atomic.Bool
	// blocked counts the calls blocked
	blocked atomic.Int32
}

var errBrokerDown = errors.New("broker down")

func (p *recorder) Publish(ctx context.Context, msgs []usage.Message) error {
	if p.block.Load() {
		p.blocked.Add(1)
		<-ctx.Done()
		return ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.fail != nil && p.fail(p.calls) {
		return errBrokerDown
	}
	for _, m := range msgs {
		p.msgs = append(p.msgs, usage.Message{Key: append([]byte(nil), m.Key...), Value: append([]byte(nil), m.Value...)})
	}
	return nil
}

func (p *recorder) setFail(f func(int) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = f
}

// reports decodes what was published.
func (p *recorder) reports(t *testing.T) []*weirv1.UsageReport {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*weirv1.UsageReport, len(p.msgs))
	for i, m := range p.msgs {
		out[i] = &weirv1.UsageReport{}
		if err := proto.Unmarshal(m.Value, out[i]); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if string(m.Key) != out[i].Instance {
			t.Fatalf("message %d: key %q, want the instance %q", i, m.Key, out[i].Instance)
		}
	}
	return out
}

func (p *recorder) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.msgs)
}

type progress struct{}

func (progress) Applied() (uint64, int64) { return 7, 42 }

// t0 is 300ms into a second.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 300_000_000, time.UTC)

// startReporter runs a Reporter on clock until the test ends; stop
// cancels it, moving the clock on after a second if Run has not returned
// by then, and returns Run's error.
func startReporter(t *testing.T, clock *fakeclock.Clock, cfg usage.ReporterConfig) (rep *usage.Reporter, stop func() error) {
	t.Helper()
	leakcheck.Check(t, "weir/internal/dc/usage.(*Reporter)")
	cfg.Clock = clock
	cfg.Logger = slog.New(slog.DiscardHandler)
	if cfg.DC == "" {
		cfg.DC = "eu"
	}
	if cfg.Instance == "" {
		cfg.Instance = "eu-test-1"
	}
	rep, err := usage.NewReporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rep.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			start := time.Now()
			deadline := time.After(10 * time.Second)
			for {
				select {
				case runErr = <-done:
					return
				case <-deadline:
					t.Fatal("Run did not return 10s after its context was cancelled")
				case <-time.After(5 * time.Millisecond):
					// A Run that does not return at once waits for a
					// backoff or the shutdown timeout: move on through
					// them. Not at once, lest a tick come first.
					if time.Since(start) > time.Second {
						clock.Advance(time.Second)
					}
				}
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return rep, stop
}

func TestReporterConfigValidate(t *testing.T) {
	agg := newAggregator(t, usage.AggregatorConfig{})
	pub := &recorder{}
	ok := usage.ReporterConfig{DC: "eu", Source: agg, Publisher: pub}
	for _, tc := range []struct {
		name string
		mut  func(*usage.ReporterConfig)
		want string // in the error; "" for none
	}{
		{"defaults", func(*usage.ReporterConfig) {}, ""},
		{"no DC", func(c *usage.ReporterConfig) { c.DC = "" }, "DC"},
		{"DC not UTF-8", func(c *usage.ReporterConfig) { c.DC = "\xff" }, "DC"},
		{"no Source", func(c *usage.ReporterConfig) { c.Source = nil }, "Source"},
		{"no Publisher", func(c *usage.ReporterConfig) { c.Publisher = nil }, "Publisher"},
		{"interval too short", func(c *usage.ReporterConfig) { c.Interval = time.Millisecond }, "Interval"},
		{"interval not whole ms", func(c *usage.ReporterConfig) { c.Interval = 10500 * time.Microsecond }, "Interval"},
		{"small messages", func(c *usage.ReporterConfig) { c.MaxMessageBytes = 1000 }, "MaxMessageBytes"},
		{"negative buffer", func(c *usage.ReporterConfig) { c.BufferReports = -1 }, "BufferReports"},
		{"negative timeout", func(c *usage.ReporterConfig) { c.PublishTimeout = -1 }, "negative"},
		{"backoffs crossed", func(c *usage.ReporterConfig) { c.MinBackoff, c.MaxBackoff = time.Second, time.Millisecond }, "MinBackoff"},
		{"min backoff above the default max", func(c *usage.ReporterConfig) { c.MinBackoff = time.Minute }, "MinBackoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.mut(&cfg)
			_, err := usage.NewReporter(cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("NewReporter: %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("NewReporter error = %v, want one about %s", err, tc.want)
			}
		})
	}
}

// TestReporterHeartbeats checks that a report goes out every interval,
// aligned, even with nothing counted, and a last one at shutdown.
func TestReporterHeartbeats(t *testing.T) {
	clock := fakeclock.New(t0)
	pub := &recorder{}
	rep, stop := startReporter(t, clock, usage.ReporterConfig{
		Source: newAggregator(t, usage.AggregatorConfig{}), Publisher: pub, Progress: progress{},
	})
	for i := 1; i <= 3; i++ {
		clock.WaitForTimers(t, 1)
		clock.Advance(time.Second)
		wait.For(t, 5*time.Second, fmt.Sprintf("report %d", i), func() bool { return pub.count() == i })
	}
	clock.Advance(250 * time.Millisecond)
	if err := stop(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	got := pub.reports(t)
	if len(got) != 4 {
		t.Fatalf("got %d reports, want 4", len(got))
	}
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	for i, r := range got {
		want := &weirv1.UsageReport{
			Dc: "eu", Instance: "eu-test-1", Sequence: uint64(i + 1),
			IntervalStartMs: start + int64(i)*1000, IntervalMs: 1000, Epoch: 7, AppliedRevision: 42,
		}
		if !proto.Equal(r, want) {
			t.Errorf("report %d = %v, want %v", i, r, want)
		}
	}
	if s := rep.Stats(); s.Sequence != 4 || s.Sent != 4 || s.Dropped != 0 || s.Buffered != 0 {
		t.Errorf("Stats = %+v, want 4 sent of 4", s)
	}
}

// TestReporterCounts checks that what the Aggregator counts reaches the
// report of its interval.
func TestReporterCounts(t *testing.T) {
	set := compile(t)
	agg := newAggregator(t, usage.AggregatorConfig{Shares: &recordingShares{share: 0.5}})
	clock := fakeclock.New(t0)
	pub := &recorder{}
	_, stop := startReporter(t, clock, usage.ReporterConfig{Source: agg, Publisher: pub, Interval: 500 * time.Millisecond})
	feed(t, agg, set, dec{rule: "per-user", key: "a", allowed: true, remaining: 90}, dec{rule: "per-user", key: "a"})
	clock.WaitForTimers(t, 1)
	clock.Advance(200 * time.Millisecond) // to 12:00:00.500
	wait.For(t, 5*time.Second, "first report", func() bool { return pub.count() == 1 })
	feed(t, agg, set, dec{rule: "site", allowed: true, remaining: 9})
	clock.WaitForTimers(t, 1)
	clock.Advance(500 * time.Millisecond)
	wait.For(t, 5*time.Second, "second report", func() bool { return pub.count() == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := pub.reports(t)
	want := []*weirv1.UsageReport{
		{Dc: "eu", Instance: "eu-test-1", Sequence: 1, IntervalStartMs: t0.UnixMilli() - 300, IntervalMs: 500, Rules: []*weirv1.RuleUsage{{
			Domain: "shop", RuleId: "per-user", Offered: 2, Admitted: 1, Rejected: 1, Share: 0.5,
			Keys: []*weirv1.KeyUsage{{Key: "a", Offered: 2, Admitted: 1, Rejected: 1, Limit: 100}},
		}}},
		{Dc: "eu", Instance: "eu-test-1", Sequence: 2, IntervalStartMs: t0.UnixMilli() + 200, IntervalMs: 500, Rules: []*weirv1.RuleUsage{{
			Domain: "shop", RuleId: "site", Offered: 1, Admitted: 1, Share: 0.5,
		}}},
		{Dc: "eu", Instance: "eu-test-1", Sequence: 3, IntervalStartMs: t0.UnixMilli() + 700, IntervalMs: 500},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d reports, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("report %d:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
}

// TestReporterLateTimer checks that a tick that comes late reports the
// interval that just ended, with everything counted since the last one.
func TestReporterLateTimer(t *testing.T) {
	clock := fakeclock.New(t0)
	pub := &recorder{}
	_, stop := startReporter(t, clock, usage.ReporterConfig{Source: newAggregator(t, usage.AggregatorConfig{}), Publisher: pub})
	clock.WaitForTimers(t, 1)
	clock.Advance(2500 * time.Millisecond) // 12:00:02.800
	wait.For(t, 5*time.Second, "a report", func() bool { return pub.count() == 1 })
	clock.WaitForTimers(t, 1)
	clock.Advance(200 * time.Millisecond) // 12:00:03.000
	wait.For(t, 5*time.Second, "a second report", func() bool { return pub.count() == 2 })
	_ = stop()
	got := pub.reports(t)
	base := t0.UnixMilli() - 300
	if got[0].IntervalStartMs != base+1000 || got[1].IntervalStartMs != base+2000 {
		t.Fatalf("interval starts %d, %d; want %d, %d", got[0].IntervalStartMs-base, got[1].IntervalStartMs-base, 1000, 2000)
	}
}

// bigSource returns rules with many long keys.
type bigSource struct{ rules []*weirv1.RuleUsage }

func (s bigSource) Flush() []*weirv1.RuleUsage {
	out := make([]*weirv1.RuleUsage, len(s.rules))
	for i, r := range s.rules {
		out[i] = proto.CloneOf(r)
	}
	return out
}

func bigRule(id string, keys, keyLen int) *weirv1.RuleUsage {
	ru := &weirv1.RuleUsage{Domain: "shop", RuleId: id, Offered: 1000, Admitted: 900, Rejected: 50, Share: 0.3, KeysDropped: 4}
	for i := range keys {
		ru.Keys = append(ru.Keys, &weirv1.KeyUsage{Key: fmt.Sprintf("%0*d", keyLen, i), Offered: 10, Admitted: 9, Rejected: 1, Limit: 100})
	}
	return ru
}

// TestReporterSplits checks that large reports are split into messages
// within the bound, each with its own sequence, and that adding up a
// rule's entries gives its counts and keys back.
func TestReporterSplits(t *testing.T) {
	const limit = usage.MinMessageBytes
	for _, tc := range []struct {
		name  string
		rules []*weirv1.RuleUsage
		msgs  int // at least
	}{
		{"no rules", nil, 1},
		{"small", []*weirv1.RuleUsage{bigRule("a", 3, 10), bigRule("b", 0, 0)}, 1},
		{"many rules", func() []*weirv1.RuleUsage {
			var rs []*weirv1.RuleUsage
			for i := range 200 {
				rs = append(rs, bigRule(fmt.Sprint("r", i), 2, 100))
			}
			return rs
		}(), 4},
		{"one rule with many keys", []*weirv1.RuleUsage{bigRule("small", 1, 10), bigRule("huge", 100, 1000), bigRule("after", 1, 10)}, 7},
		{"keys of the longest size", []*weirv1.RuleUsage{bigRule("longest", 9, 4096)}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := fakeclock.New(t0)
			pub := &recorder{}
			_, stop := startReporter(t, clock, usage.ReporterConfig{
				Source: bigSource{tc.rules}, Publisher: pub, MaxMessageBytes: limit,
				Progress: progress{},
			})
			clock.WaitForTimers(t, 1)
			clock.Advance(time.Second)
			wait.For(t, 5*time.Second, "the first interval's messages", func() bool { return pub.count() >= tc.msgs })
			clock.WaitForTimers(t, 1) // the interval is fully queued
			_ = stop()
			pub.mu.Lock()
			for i, m := range pub.msgs {
				if len(m.Value) > limit {
					t.Errorf("message %d: %d bytes, over %d", i, len(m.Value), limit)
				}
			}
			pub.mu.Unlock()
			got := pub.reports(t)
			type sum struct {
				c    counts
				keys []string
			}
			sums := map[string]*sum{}
			var order []string
			var first []*weirv1.UsageReport
			for i, r := range got {
				if r.Sequence != uint64(i+1) {
					t.Fatalf("message %d has sequence %d", i, r.Sequence)
				}
				if r.IntervalStartMs != t0.UnixMilli()-300 {
					continue // the shutdown's report
				}
				first = append(first, r)
				for _, ru := range r.Rules {
					s := sums[ru.RuleId]
					if s == nil {
						s = &sum{}
						sums[ru.RuleId] = s
						order = append(order, ru.RuleId)
					}
					if ru.Share != 0.3 {
						t.Errorf("rule %s: share %v in a piece, want 0.3", ru.RuleId, ru.Share)
					}
					s.c = counts{s.c.offered + ru.Offered, s.c.admitted + ru.Admitted, s.c.rejected + ru.Rejected}
					for _, k := range ru.Keys {
						s.keys = append(s.keys, k.Key)
					}
				}
			}
			if len(first) < tc.msgs {
				t.Fatalf("the interval took %d messages, want at least %d", len(first), tc.msgs)
			}
			for _, r := range first {
				if r.Epoch != 7 || r.AppliedRevision != 42 || r.Dc != "eu" {
					t.Errorf("message %d lacks the header: %v", r.Sequence, r)
				}
			}
			if len(order) != len(tc.rules) {
				t.Fatalf("got %d rules, want %d", len(order), len(tc.rules))
			}
			for i, ru := range tc.rules {
				if order[i] != ru.RuleId {
					t.Fatalf("rule %d is %s, want %s: order kept", i, order[i], ru.RuleId)
				}
				s := sums[ru.RuleId]
				if s.c != ruleCounts(ru) {
					t.Errorf("rule %s: pieces add up to %+v, want %+v", ru.RuleId, s.c, ruleCounts(ru))
				}
				if len(s.keys) != len(ru.Keys) {
					t.Fatalf("rule %s: %d keys, want %d", ru.RuleId, len(s.keys), len(ru.Keys))
				}
				for j, k := range ru.Keys {
					if s.keys[j] != k.Key {
						t.Fatalf("rule %s: key %d is %.10q, want %.10q", ru.RuleId, j, s.keys[j], k.Key)
					}
				}
			}
		})
	}
}

// TestReporterBufferOverflow checks that while Kafka fails, the buffer
// keeps the newest reports, drops the oldest and counts them, and that
// they go out in order once it is back.
func TestReporterBufferOverflow(t *testing.T) {
	clock := fakeclock.New(t0)
	pub := &recorder{}
	pub.setFail(func(int) bool { return true })
	rep, stop := startReporter(t, clock, usage.ReporterConfig{
		Source: newAggregator(t, usage.AggregatorConfig{}), Publisher: pub,
		BufferReports: 3, MinBackoff: time.Hour, MaxBackoff: time.Hour,
	})
	clock.WaitForTimers(t, 1)
	clock.Advance(time.Second)
	clock.WaitForTimers(t, 2) // the next tick and the sender's backoff
	for range 9 {
		clock.Advance(time.Second)
		clock.WaitForTimers(t, 2)
	}
	wait.For(t, 5*time.Second, "7 dropped", func() bool { return rep.Dropped() == 7 })
	if s := rep.Stats(); s.Buffered != 3 || s.Sent != 0 || s.Sequence != 10 || s.PublishErrors != 1 {
		t.Fatalf("Stats = %+v, want 3 buffered, 10 made, 1 error", s)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(rep)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	metrics := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		metrics[mf.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	want := map[string]float64{
		"weir_usage_reports_dropped_total": 7, "weir_usage_reports_buffered": 3,
		"weir_usage_reports_sent_total": 0, "weir_usage_publish_errors_total": 1,
	}
	if fmt.Sprint(metrics) != fmt.Sprint(want) {
		t.Fatalf("metrics %v, want %v", metrics, want)
	}

	pub.setFail(nil)
	clock.Advance(time.Hour) // the backoff ends, and a tick comes
	wait.For(t, 5*time.Second, "the buffer published", func() bool { s := rep.Stats(); return s.Buffered == 0 && s.Sent >= 3 })
	_ = stop()
	got := pub.reports(t)
	// The tick's report (11) may have pushed 8 out before the sender
	// took it; either way what was published is the newest, in order.
	if first := got[0].Sequence; first != 8 && first != 9 {
		t.Fatalf("first published sequence %d, want 8 or 9", first)
	}
	for i, r := range got {
		if r.Sequence != got[0].Sequence+uint64(i) {
			t.Fatalf("published sequences not consecutive: %d at %d", r.Sequence, i)
		}
		// Report n saw n-4 drops so far when it was made (the 4th pushed
		// the 1st out), up to the 11th.
		if r.Sequence <= 11 && r.DroppedReports != r.Sequence-4 {
			t.Errorf("report %d: dropped_reports %d, want %d", r.Sequence, r.DroppedReports, r.Sequence-4)
		}
	}
	if s := rep.Stats(); s.Sent+s.Dropped != s.Sequence || s.Sent != uint64(len(got)) {
		t.Fatalf("Stats = %+v: sent and dropped do not add up to the %d made", s, s.Sequence)
	}
}

// TestReporterRetries checks that failed publications are retried with
// backoff, in order, without loss.
func TestReporterRetries(t *testing.T) {
	clock := fakeclock.New(t0)
	pub := &recorder{}
	pub.setFail(func(call int) bool { return call <= 3 })
	rep, stop := startReporter(t, clock, usage.ReporterConfig{
		Source: newAggregator(t, usage.AggregatorConfig{}), Publisher: pub,
		MinBackoff: 100 * time.Millisecond, MaxBackoff: 400 * time.Millisecond,
	})
	deadline := time.Now().Add(5 * time.Second)
	for pub.count() < 3 && time.Now().Before(deadline) {
		clock.Advance(100 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	_ = stop()
	got := pub.reports(t)
	if len(got) < 3 {
		t.Fatalf("%d reports published, want at least 3", len(got))
	}
	for i, r := range got {
		if r.Sequence != uint64(i+1) {
			t.Fatalf("report %d has sequence %d: out of order or lost", i, r.Sequence)
		}
	}
	if s := rep.Stats(); s.Dropped != 0 || s.PublishErrors != 3 {
		t.Fatalf("Stats = %+v, want 3 errors and nothing dropped", s)
	}
}

// TestReporterHungPublisher checks that a Publisher that never returns
// blocks neither the decisions nor the reports, and that Run still stops
// within its ShutdownTimeout.
func TestReporterHungPublisher(t *testing.T) {
	set := compile(t)
	agg := newAggregator(t, usage.AggregatorConfig{})
	clock := fakeclock.New(t0)
	pub := &recorder{}
	pub.block.Store(true)
	rep, stop := startReporter(t, clock, usage.ReporterConfig{
		Source: agg, Publisher: pub, BufferReports: 5, PublishTimeout: time.Hour,
	})
	resp := response(item(t, set, dec{rule: "per-user", key: "a"}))
	var wg sync.WaitGroup
	var decided atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				agg.Checked("shop", resp, 0)
				decided.Add(1)
			}
		}()
	}
	clock.WaitForTimers(t, 1)
	clock.Advance(time.Second)
	wait.For(t, 5*time.Second, "the first report stuck in Publish", func() bool { return pub.blocked.Load() == 1 })
	for range 19 {
		clock.WaitForTimers(t, 1)
		clock.Advance(time.Second)
	}
	wg.Wait()
	clock.WaitForTimers(t, 1)
	if decided.Load() != 8000 {
		t.Fatalf("%d decisions made, want 8000", decided.Load())
	}
	// One message is stuck in Publish, 5 wait, the rest were dropped.
	if s := rep.Stats(); s.Buffered != 5 || s.Dropped != 14 || s.Sequence != 20 {
		t.Fatalf("Stats = %+v, want 5 buffered and 14 dropped of 20", s)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// The stuck message and the buffered ones, with the shutdown's report
	// pushing one more out, are lost.
	if s := rep.Stats(); s.Sent != 0 || s.Dropped != 21 || s.Buffered != 0 {
		t.Fatalf("after shutdown: Stats = %+v, want all 21 dropped", s)
	}
}

func TestReporterRunOnce(t *testing.T) {
	clock := fakeclock.New(t0)
	rep, stop := startReporter(t, clock, usage.ReporterConfig{Source: newAggregator(t, usage.AggregatorConfig{}), Publisher: &recorder{}})
	clock.WaitForTimers(t, 1)
	if err := rep.Run(context.Background()); !errors.Is(err, usage.ErrStarted) {
		t.Fatalf("second Run = %v, want ErrStarted", err)
	}
	_ = stop()
}

func TestNewInstanceID(t *testing.T) {
	a, b := usage.NewInstanceID("eu-west"), usage.NewInstanceID("eu-west")
	if a == b {
		t.Fatalf("two instance ids are both %q", a)
	}
	if !regexp.MustCompile(`^eu-west-[A-Za-z0-9._-]+-[0-9]+-[0-9a-f]{8}$`).MatchString(a) {
		t.Fatalf("instance id %q is not {dc}-{host}-{pid}-{random}", a)
	}
	if id := usage.NewInstanceID("a/b c"); !strings.HasPrefix(id, "a_b_c-") {
		t.Fatalf("NewInstanceID(%q) = %q, want unsafe characters replaced", "a/b c", id)
	}
}
