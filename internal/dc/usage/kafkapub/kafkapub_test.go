package kafkapub_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/dc/usage"
	"github.com/weirhq/weir/internal/dc/usage/kafkapub"
	"github.com/weirhq/weir/internal/testkit/kafkatest"
	"github.com/weirhq/weir/internal/testkit/rulesettest"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/limiter"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  kafkapub.Config
		want string
	}{
		{"ok", kafkapub.Config{Brokers: []string{"127.0.0.1:9092"}}, ""},
		{"no brokers", kafkapub.Config{}, "Brokers"},
		{"bad address", kafkapub.Config{Brokers: []string{"localhost"}}, "broker address"},
		{"negative timeout", kafkapub.Config{Brokers: []string{"h:1"}, WriteTimeout: -1}, "negative"},
		{"negative attempts", kafkapub.Config{Brokers: []string{"h:1"}, MaxAttempts: -1}, "MaxAttempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := kafkapub.New(tc.cfg)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New error = %v, want one about %s", err, tc.want)
			}
		})
	}
}

// checkNoLeaks fails t if goroutines of kafka-go or of the Reporter are
// still running shortly after the test's own deferred calls.
func checkNoLeaks(t *testing.T) {
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			buf := make([]byte, 1<<20)
			stacks := string(buf[:runtime.Stack(buf, true)])
			var leaked []string
			for _, g := range strings.Split(stacks, "\n\n") {
				if strings.Contains(g, "segmentio/kafka-go") || strings.Contains(g, "internal/dc/usage.(*Reporter)") {
					leaked = append(leaked, g)
				}
			}
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// read reads n messages of topic from the broker at addr.
func read(t *testing.T, addr, topic string, n int) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{addr}, GroupID: "test", Topic: topic,
		MaxWait: 50 * time.Millisecond, HeartbeatInterval: 200 * time.Millisecond, SessionTimeout: 6 * time.Second,
	})
	defer r.Close()
	var out []kafka.Message
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read message %d of %d: %v", len(out)+1, n, err)
		}
		out = append(out, m)
	}
	return out
}

// TestReporterToKafka runs the whole limiter side against an in-process
// Kafka-protocol broker: decisions counted by the Aggregator, reports made
// by the Reporter, published by kafkapub, read back with a kafka-go Reader.
func TestReporterToKafka(t *testing.T) {
	b := kafkatest.Start(t, kafkapub.DefaultTopic)
	checkNoLeaks(t)
	pub, err := kafkapub.New(kafkapub.Config{Brokers: []string{b.Addr()}})
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
		DC: "eu", Source: agg, Publisher: pub, Interval: 50 * time.Millisecond,
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

	msgs := read(t, b.Addr(), kafkapub.DefaultTopic, int(st.Sent))
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

// TestPublishOrder writes batches directly and reads them back in order.
func TestPublishOrder(t *testing.T) {
	b := kafkatest.Start(t, "usage-order")
	checkNoLeaks(t)
	pub, err := kafkapub.New(kafkapub.Config{Brokers: []string{b.Addr()}, Topic: "usage-order"})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for batch := range 3 {
		var msgs []usage.Message
		for i := range 4 {
			msgs = append(msgs, usage.Message{Key: []byte("instance-1"), Value: fmt.Appendf(nil, "%d", batch*4+i)})
		}
		if err := pub.Publish(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Publish(ctx, nil); err != nil {
		t.Fatalf("Publish of nothing = %v", err)
	}
	for i, m := range read(t, b.Addr(), "usage-order", 12) {
		if string(m.Value) != fmt.Sprint(i) {
			t.Fatalf("message %d is %q: out of order", i, m.Value)
		}
	}
}

// TestPublishBrokerDown checks that Publish fails, within its context,
// when no broker answers, with an error that says what failed.
func TestPublishBrokerDown(t *testing.T) {
	b := kafkatest.Start(t, kafkapub.DefaultTopic)
	addr := b.Addr()
	b.Close()
	checkNoLeaks(t)
	pub, err := kafkapub.New(kafkapub.Config{Brokers: []string{addr}, DialTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err = pub.Publish(ctx, []usage.Message{{Key: []byte("k"), Value: []byte("v")}})
	if err == nil || !strings.Contains(err.Error(), "kafkapub: write 1 messages") {
		t.Fatalf("Publish to a dead broker = %v, want a kafkapub error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Publish took %v with a 1s context", d)
	}
}
