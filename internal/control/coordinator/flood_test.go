package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestSkippedReportsFlood: a producer that floods the usage topic with
// messages that are not reports, and with reports the planner refuses,
// and a limiter's credentials writing undecodable instance records, get
// every one counted and skipped, cost the log one line per skipLogEvery
// (not one per message or record), and stop no planning: valid reports
// sent after the flood still move the shares.
func TestSkippedReportsFlood(t *testing.T) {
	h := newHarness(t)
	logs := &logRecorder{}
	c := h.startWith("c1", func(cfg *Config) { cfg.Logger = slog.New(logs) })
	waitFor(t, 5*time.Second, "c1 leads", c.c.Leader)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	start := time.Now()
	const garbage, refused = 1500, 500
	msgs := make([]kafka.Message, 0, garbage)
	for i := range garbage {
		msgs = append(msgs, kafka.Message{Key: []byte("x"), Value: []byte(fmt.Sprintf("\xff\xff not a report %d", i))})
	}
	if err := h.w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	reports := make([]*weirv1.UsageReport, 0, refused)
	for i := range refused {
		// A DC the planner does not know.
		reports = append(reports, &weirv1.UsageReport{Dc: "nowhere", Instance: fmt.Sprintf("n-%d", i), Sequence: 1,
			IntervalStartMs: time.Now().UnixMilli(), IntervalMs: 200})
	}
	h.send(ctx, reports...)
	const records = 300
	for i := range records {
		if _, err := h.cli.Put(ctx, h.layout.Instance("a", fmt.Sprintf("bad-%d", i)), "\xff\xff not a record"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "every message and record skipped", func() bool {
		return c.c.stats.badMessages.Load() >= garbage+refused && c.c.stats.badInstances.Load() >= records
	})
	if got := c.c.stats.badMessages.Load(); got != garbage+refused {
		t.Fatalf("%d messages counted as skipped, want %d", got, garbage+refused)
	}
	lines := len(logs.find("usage report skipped")) + len(logs.find("instance record skipped"))
	if lines < 1 || lines > 1+int(time.Since(start)/skipLogEvery) {
		t.Fatalf("%d log lines of skipped reports and records, want one per %v at most", lines, skipLogEvery)
	}

	// Planning goes on: DC a's demand takes most of the limit.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	h.feed(ctx, &wg, func() map[string]uint64 { return map[string]uint64{"a": 180, "b": 10, "c": 10} })
	waitFor(t, 15*time.Second, "the shares follow valid reports after the flood", func() bool { return h.shares(ctx)["a"] >= 0.85 })
}
