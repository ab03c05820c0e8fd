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
// gets every one counted and skipped, costs the log one line per
// skipLogEvery (not one per message), and stops no planning: a valid
// report sent after the flood still moves the shares.
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
	waitFor(t, 20*time.Second, "every message skipped", func() bool { return c.c.stats.badMessages.Load() >= garbage+refused })
	if got := c.c.stats.badMessages.Load(); got != garbage+refused {
		t.Fatalf("%d messages counted as skipped, want %d", got, garbage+refused)
	}
	if got := len(logs.find("usage report skipped")); got < 1 || got > 1+int(time.Since(start)/skipLogEvery) {
		t.Fatalf("%d log lines of skipped reports, want one per %v at most", got, skipLogEvery)
	}

	// Planning goes on: DC a's demand takes most of the limit.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	h.feed(ctx, &wg, func() map[string]uint64 { return map[string]uint64{"a": 180, "b": 10, "c": 10} })
	waitFor(t, 15*time.Second, "the shares follow valid reports after the flood", func() bool { return h.shares(ctx)["a"] >= 0.85 })
}
