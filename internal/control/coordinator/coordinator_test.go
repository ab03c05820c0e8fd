package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/kafka/usagetopic"

	"github.com/segmentio/kafka-go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/control/planner"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/internal/testkit/kafkatest"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

var simDCs = []string{"a", "b", "c"}

func simRule() rule.Rule {
	return rule.Rule{Domain: "api", ID: "r", Limit: 1000, WindowSeconds: 1, Scope: rule.ScopeGlobal, Enabled: true}
}

// harness runs coordinators against a real embedded etcd and an in-process
// Kafka-protocol broker, and plays the limiters' reports.
type harness struct {
	t      *testing.T
	etcd   *etcdtest.Cluster
	cli    *clientv3.Client
	broker *kafkatest.Broker
	w      *kafka.Writer
	layout etcdlayout.Layout
	seq    uint64
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, etcd: etcdtest.Start(t), broker: kafkatest.Start(t, usagetopic.Name)}
	h.cli = h.etcd.Client(t)
	// A transport of its own, closed with the writer: kafka-go's default
	// one keeps its connections (and their goroutines) for the process.
	tr := &kafka.Transport{}
	h.w = &kafka.Writer{Addr: kafka.TCP(h.broker.Addr()), Topic: usagetopic.Name, Balancer: &kafka.Hash{}, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireOne, Transport: tr}
	t.Cleanup(func() { h.w.Close(); tr.CloseIdleConnections() })
	return h
}

type running struct {
	c      *Coordinator
	cancel context.CancelFunc
	done   chan struct{}
}

func (h *harness) start(name string) *running {
	return h.startRules(name, simRule())
}

// startRules starts a coordinator planning rules.
func (h *harness) startRules(name string, rules ...rule.Rule) *running {
	return h.startWith(name, func(cfg *Config) { cfg.Rules = func() []rule.Rule { return rules } })
}

// startWith starts a coordinator planning the harness's rule, its Config
// changed by mod.
func (h *harness) startWith(name string, mod func(*Config)) *running {
	cfg := Config{
		Etcd: h.etcd.Client(h.t), Layout: h.layout, Name: name,
		Planner: planner.Config{DCs: simDCs, Interval: 200 * time.Millisecond, TTL: 2 * time.Second, Warmup: 2},
		Rules:   func() []rule.Rule { return []rule.Rule{simRule()} },
		NewSource: func(context.Context) (Source, error) {
			return usagetopic.NewConsumer(usagetopic.ConsumerConfig{Brokers: []string{h.broker.Addr()}})
		},
		SessionTTL: 1,
		Logger:     slog.New(slog.DiscardHandler),
	}
	mod(&cfg)
	c, err := New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); c.Run(ctx) }()
	h.t.Cleanup(r.stop)
	return r
}

func (r *running) stop() {
	r.cancel()
	<-r.done
}

// report publishes one interval's offered counts for every DC.
func (h *harness) report(ctx context.Context, offered map[string]uint64) {
	usage := make(map[string]*weirv1.RuleUsage, len(offered))
	for dc, n := range offered {
		usage[dc] = &weirv1.RuleUsage{Domain: "api", RuleId: "r", Offered: n, Admitted: n}
	}
	h.publish(ctx, usage)
}

// publish sends, from each DC, one report of the interval that just ended
// holding its usage of the harness's rule.
func (h *harness) publish(ctx context.Context, usage map[string]*weirv1.RuleUsage) {
	start := time.Now().UnixMilli()/200*200 - 200
	var reports []*weirv1.UsageReport
	for dc, ru := range usage {
		h.seq++
		reports = append(reports, &weirv1.UsageReport{Dc: dc, Instance: dc + "-1", Sequence: h.seq, IntervalStartMs: start, IntervalMs: 200,
			Rules: []*weirv1.RuleUsage{ru}})
	}
	h.send(ctx, reports...)
}

// send writes reports to the usage topic, each keyed by its instance.
func (h *harness) send(ctx context.Context, reports ...*weirv1.UsageReport) {
	msgs := make([]kafka.Message, 0, len(reports))
	for _, r := range reports {
		b, err := proto.Marshal(r)
		if err != nil {
			h.t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(r.Instance), Value: b})
	}
	if err := h.w.WriteMessages(ctx, msgs...); err != nil && ctx.Err() == nil {
		h.t.Errorf("publish: %v", err)
	}
}

// shares reads every DC's share of the rule from etcd.
func (h *harness) shares(ctx context.Context) map[string]float64 {
	out := map[string]float64{}
	for _, dc := range simDCs {
		resp, err := h.cli.Get(ctx, h.layout.Assignment(dc, "api", "r"))
		if err != nil || len(resp.Kvs) == 0 {
			continue
		}
		var d weirv1.RuleAssignment
		if err := proto.Unmarshal(resp.Kvs[0].Value, &d); err != nil {
			h.t.Fatalf("decode: %v", err)
		}
		out[dc] = d.GetShare()
	}
	return out
}

// feed publishes reports just after every 200 ms boundary, as limiters do,
// until ctx is done.
func (h *harness) feed(ctx context.Context, wg *sync.WaitGroup, offered func() map[string]uint64) {
	wg.Go(func() {
		for {
			now := time.Now()
			next := now.Truncate(200 * time.Millisecond).Add(205 * time.Millisecond)
			select {
			case <-ctx.Done():
				return
			case <-time.After(next.Sub(now)):
				h.report(ctx, offered())
				h.ackAll(ctx)
			}
		}
	})
}

// ackAll registers one instance per DC that has applied everything in
// etcd so far, as limiters that apply documents at once would: the
// coordinator takes a DC with no instance as one that acknowledged nothing.
// It returns the revision acknowledged (0 when ctx is done).
func (h *harness) ackAll(ctx context.Context) int64 {
	resp, err := h.cli.Get(ctx, h.layout.Instances(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0 // ctx done
	}
	for _, dc := range simDCs {
		b, err := proto.Marshal(&weirv1.InstanceRecord{Dc: dc, Instance: dc + "-1", AppliedRevision: resp.Header.Revision})
		if err != nil {
			h.t.Fatal(err)
		}
		if _, err := h.cli.Put(ctx, h.layout.Instance(dc, dc+"-1"), string(b)); err != nil {
			return 0
		}
	}
	return resp.Header.Revision
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCoordinatorLeadsRebalancesAndFailsOver(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c1 := h.start("c1")
	waitFor(t, 5*time.Second, "c1 leads", c1.c.Leader)
	c2 := h.start("c2")

	var mu sync.Mutex
	// Per 200 ms interval, of a limit of 1000 per second (200 per interval).
	demand := map[string]uint64{"a": 180, "b": 10, "c": 10}
	fctx, stopFeed := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopFeed()
	h.feed(fctx, &wg, func() map[string]uint64 {
		mu.Lock()
		defer mu.Unlock()
		return map[string]uint64{"a": demand["a"], "b": demand["b"], "c": demand["c"]}
	})
	waitFor(t, 15*time.Second, "a's share reaches 0.85", func() bool {
		return h.shares(ctx)["a"] >= 0.85
	})
	if c2.c.Leader() {
		t.Fatal("two leaders")
	}
	epoch := c1.c.Status().Epoch

	// The leader dies; the standby takes over from what etcd holds.
	c1.stop()
	waitFor(t, 5*time.Second, "c2 takes over", c2.c.Leader)
	if got := h.shares(ctx)["a"]; got < 0.85 {
		t.Errorf("right after takeover a's share is %v: the new leader started from zero", got)
	}
	mu.Lock()
	demand = map[string]uint64{"a": 10, "b": 180, "c": 10}
	mu.Unlock()
	waitFor(t, 15*time.Second, "b's share reaches 0.85 under the new leader", func() bool { return h.shares(ctx)["b"] >= 0.85 })
	if got := c2.c.Status().Epoch; got <= epoch {
		t.Errorf("new leader's epoch %d ≤ old leader's %d", got, epoch)
	}
	sum := 0.0
	for _, v := range h.shares(ctx) {
		sum += v
	}
	if sum > 1 {
		t.Errorf("shares in etcd sum to %v", sum)
	}
}

// A leader whose election key is gone is deposed by its next fenced write:
// it cannot overwrite its successor.
func TestCoordinatorFencing(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c1 := h.start("c1")
	waitFor(t, 5*time.Second, "c1 leads", c1.c.Leader)
	// Take the election key away, as if c1's session had expired while it
	// was paused; a fenced write must now fail.
	resp, err := h.cli.Get(ctx, h.layout.Election(), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("election keys: %v %v", resp, err)
	}
	if _, err := h.cli.Delete(ctx, string(resp.Kvs[0].Key)); err != nil {
		t.Fatal(err)
	}
	// Reports make the leader write: the DCs' leases, every interval.
	fctx, stopFeed := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopFeed()
	h.feed(fctx, &wg, func() map[string]uint64 { return map[string]uint64{"a": 10, "b": 10, "c": 10} })
	waitFor(t, 5*time.Second, "c1 deposed by its next fenced write", func() bool { return c1.c.stats.deposed.Load() > 0 })
	// It campaigns again and, alone, leads a new term.
	waitFor(t, 5*time.Second, "c1 leads again", c1.c.Leader)
}

// An operator's policy in etcd takes effect: a drained DC's share goes to 0
// and a pinned DC gets its pin. A corrupt policy is ignored.
func TestCoordinatorPolicies(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c1 := h.start("c1")
	waitFor(t, 5*time.Second, "c1 leads", c1.c.Leader)
	if _, err := h.cli.Put(ctx, h.layout.Policy("api", "r"), `{"dcs":{"c":{"drained":true},"a":{"pin":0.6}}}`); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	fctx, stop := context.WithCancel(ctx)
	defer wg.Wait()
	defer stop()
	h.feed(fctx, &wg, func() map[string]uint64 {
		mu.Lock()
		defer mu.Unlock()
		return map[string]uint64{"a": 100, "b": 100, "c": 100}
	})
	waitFor(t, 10*time.Second, "c drained and a pinned at 0.6", func() bool {
		s := h.shares(ctx)
		return s["c"] == 0 && s["a"] == 0.6 && s["b"] > 0.35
	})
	if _, err := h.cli.Put(ctx, h.layout.Policy("api", "r"), `{"dcs":{"zz":{"pin":2}}}`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the corrupt policy counted", func() bool { return c1.c.stats.badPolicies.Load() > 0 })
	if s := h.shares(ctx); s["c"] != 0 || s["a"] != 0.6 {
		t.Errorf("after a corrupt policy the shares are %v: the last valid policy should stay", s)
	}
}

// A new leader skips corrupt documents in etcd, and assumes the DC may hold
// anything of that rule: it never grows the others into it. Many corrupt
// documents cost the log one line, and the count in "loaded assignments".
func TestCoordinatorSkipsCorruptDocuments(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const many = 200
	for i := range many {
		if _, err := h.cli.Put(ctx, h.layout.Assignment("a", "api", fmt.Sprintf("bad-%d", i)), "\xff\xff not protobuf"); err != nil {
			t.Fatal(err)
		}
	}
	for key, value := range map[string]string{
		h.layout.Assignment("a", "api", "r"):   "\xff\xff not protobuf",
		h.layout.Lease("b"):                    "\x0a\x01",
		h.layout.Quotas() + "c/too/many/parts": "x",
		h.layout.Instances() + "a/i-1":         "\xff",
		h.layout.Assignment("zz", "api", "r"):  "",
	} {
		if _, err := h.cli.Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	}
	logs := &logRecorder{}
	start := time.Now()
	c1 := h.startWith("c1", func(cfg *Config) { cfg.Logger = slog.New(logs) })
	waitFor(t, 5*time.Second, "c1 leads", c1.c.Leader)
	waitFor(t, 5*time.Second, "corrupt documents counted", func() bool { return c1.c.stats.badDocs.Load() >= many+2 })
	if c1.c.stats.badInstances.Load() == 0 {
		t.Error("the corrupt instance record was not counted")
	}
	lines := len(logs.find("etcd document skipped")) + len(logs.find("instance record skipped"))
	if lines < 1 || lines > 1+int(time.Since(start)/skipLogEvery) {
		t.Errorf("%d log lines of skipped documents and records, want one per %v at most", lines, skipLogEvery)
	}
	loaded := logs.find("loaded assignments")
	if len(loaded) == 0 || loaded[0]["skipped"].Int64() < many+2 {
		t.Errorf("loaded assignments: got %v, want skipped at least %d", loaded, many+2)
	}
}

// TestCoordinatorTakesReadingsBetweenIntervals: a readings-only report
// (UsageReport.readings_only, sent by limiters between their interval
// reports) reaches the leader through Kafka with its flag, and is
// counted as readings, not as a report.
func TestCoordinatorTakesReadingsBetweenIntervals(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := h.start("c1")
	waitFor(t, 5*time.Second, "c1 leads", c.c.Leader)
	// The consumer starts at the topic's end once it has joined its group,
	// which may be after the election: a report is sent every 200 ms until
	// one counts, and then the count must hold still for a second (a
	// report sent just before may still come).
	last := time.Time{}
	waitFor(t, 10*time.Second, "an interval report counted", func() bool {
		if c.c.Status().Planner.Reports >= 1 {
			return true
		}
		if time.Since(last) >= 200*time.Millisecond {
			h.report(ctx, map[string]uint64{"a": 10})
			last = time.Now()
		}
		return false
	})
	reports, still := c.c.Status().Planner.Reports, time.Now()
	waitFor(t, 10*time.Second, "the interval reports' count holding still", func() bool {
		if got := c.c.Status().Planner.Reports; got != reports {
			reports, still = got, time.Now()
		}
		return time.Since(still) >= time.Second
	})

	start := time.Now().UnixMilli() / 200 * 200
	consumed := int64(5)
	h.seq++
	r := &weirv1.UsageReport{Dc: "a", Instance: "a-1", Sequence: h.seq, IntervalStartMs: start, IntervalMs: 50, ReadingsOnly: true,
		Rules: []*weirv1.RuleUsage{{Domain: "api", RuleId: "r", Offered: 900, Admitted: 900, Consumed: &consumed}}}
	h.send(ctx, r)
	waitFor(t, 10*time.Second, "the readings counted", func() bool { return c.c.Status().Planner.Readings == 1 })
	if got := c.c.Status().Planner.Reports; got != reports {
		t.Errorf("reports went from %d to %d with a readings-only report", reports, got)
	}
}
