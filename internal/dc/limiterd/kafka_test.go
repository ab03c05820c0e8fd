package limiterd

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/dc/usage"
	"github.com/weirhq/weir/internal/kafka/usagetopic"
	"github.com/weirhq/weir/internal/testkit/kafkatest"
	"github.com/weirhq/weir/internal/testkit/rulesettest"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/limiter"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestReporterToKafka runs the limiter's usage path against an in-process
// Kafka-protocol broker: decisions counted by the Aggregator, reports made
// by the Reporter, published through kafkaPublisher to the usage topic,
// read back with a kafka-go Reader.
func TestReporterToKafka(t *testing.T) {
	b := kafkatest.Start(t, usagetopic.Name)
	pub, err := usagetopic.NewPublisher(usagetopic.PublisherConfig{Brokers: []string{b.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	set := rulesettest.Compile(t, `
domain: api
rules:
  - {rule_id: per-user, key_type: user_id, limit: 10, window_seconds: 1}
`)
	r, _ := set.Rule("per-user")
	agg, err := usage.NewAggregator(usage.AggregatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := usage.NewReporter(usage.ReporterConfig{
		DC: "eu", Source: agg, Publisher: kafkaPublisher{pub}, Interval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rep.Run(ctx) }()

	// 30 decisions on "alice", the last 20 rejected.
	m, err := r.KeyFor("alice")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		agg.Checked("api", &limiter.Response{Items: []limiter.ItemResult{{Allowed: i < 10, Results: []limiter.RuleResult{{
			Match: m, Decision: algorithm.Decision{Allowed: i < 10, Limit: 10, Remaining: int64(max(9-i, 0))}, Source: limiter.SourceStore, Hits: 1,
		}}}}}, 0)
	}
	deadline := time.Now().Add(20 * time.Second)
	for rep.Stats().Sent < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: %+v", rep.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := rep.Stats()
	if st.Dropped != 0 || st.Sent != st.Sequence {
		t.Fatalf("Stats = %+v, want every report sent", st)
	}

	msgs := b.Read(t, usagetopic.Name, int(st.Sent))
	var offered, admitted, rejected uint64
	for i, msg := range msgs {
		if string(msg.Key) != rep.Instance() {
			t.Errorf("message %d: key %q, want the instance %q", i, msg.Key, rep.Instance())
		}
		if msg.Partition != msgs[0].Partition {
			t.Errorf("message %d in partition %d, the first in %d: one instance, one partition", i, msg.Partition, msgs[0].Partition)
		}
		var ur weirv1.UsageReport
		if err := proto.Unmarshal(msg.Value, &ur); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if ur.Sequence != uint64(i+1) || ur.Dc != "eu" || ur.Instance != rep.Instance() || ur.IntervalMs != 50 || ur.IntervalStartMs%50 != 0 {
			t.Errorf("message %d: %v", i, &ur)
		}
		for _, ru := range ur.Rules {
			offered += ru.Offered
			admitted += ru.Admitted
			rejected += ru.Rejected
			if len(ru.Keys) != 1 || ru.Keys[0].Key != "alice" || ru.Keys[0].Limit != 10 {
				t.Errorf("message %d: keys %v, want alice's", i, ru.Keys)
			}
		}
	}
	if offered != 30 || admitted != 10 || rejected != 20 {
		t.Fatalf("reports add up to offered %d, admitted %d, rejected %d; want 30, 10, 20", offered, admitted, rejected)
	}
}
