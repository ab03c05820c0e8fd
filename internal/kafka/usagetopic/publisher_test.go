package usagetopic_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/kafka/usagetopic"
	"github.com/weirhq/weir/internal/testkit/kafkatest"
	"github.com/weirhq/weir/internal/testkit/leakcheck"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  usagetopic.PublisherConfig
		want string
	}{
		{"ok", usagetopic.PublisherConfig{Brokers: []string{"127.0.0.1:9092"}}, ""},
		{"no brokers", usagetopic.PublisherConfig{}, "Brokers"},
		{"bad address", usagetopic.PublisherConfig{Brokers: []string{"localhost"}}, "broker address"},
		{"negative timeout", usagetopic.PublisherConfig{Brokers: []string{"h:1"}, WriteTimeout: -1}, "negative"},
		{"negative attempts", usagetopic.PublisherConfig{Brokers: []string{"h:1"}, MaxAttempts: -1}, "MaxAttempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := usagetopic.NewPublisher(tc.cfg)
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

// TestPublishOrder writes batches directly and reads them back in order.
func TestPublishOrder(t *testing.T) {
	b := kafkatest.Start(t, "usage-order")
	leakcheck.Check(t, "segmentio/kafka-go", "weir/internal/kafka/usagetopic.(*Publisher)")
	pub, err := usagetopic.NewPublisher(usagetopic.PublisherConfig{Brokers: []string{b.Addr()}, Topic: "usage-order"})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for batch := range 3 {
		var msgs []usagetopic.Message
		for i := range 4 {
			msgs = append(msgs, usagetopic.Message{Key: []byte("instance-1"), Value: fmt.Appendf(nil, "%d", batch*4+i)})
		}
		if err := pub.Publish(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Publish(ctx, nil); err != nil {
		t.Fatalf("Publish of nothing = %v", err)
	}
	for i, m := range b.Read(t, "usage-order", 12) {
		if string(m.Value) != fmt.Sprint(i) {
			t.Fatalf("message %d is %q: out of order", i, m.Value)
		}
	}
}

// TestPublishBrokerDown checks that Publish fails, within its context,
// when no broker answers, with an error that says what failed.
func TestPublishBrokerDown(t *testing.T) {
	b := kafkatest.Start(t, usagetopic.Name)
	addr := b.Addr()
	b.Close()
	leakcheck.Check(t, "segmentio/kafka-go", "weir/internal/kafka/usagetopic.(*Publisher)")
	pub, err := usagetopic.NewPublisher(usagetopic.PublisherConfig{Brokers: []string{addr}, DialTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err = pub.Publish(ctx, []usagetopic.Message{{Key: []byte("k"), Value: []byte("v")}})
	if err == nil || !strings.Contains(err.Error(), "usagetopic: write 1 messages") {
		t.Fatalf("Publish to a dead broker = %v, want a usagetopic error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Publish took %v with a 1s context", d)
	}
}

// TestConsumerReadsWhatWasPublished publishes to the topic and reads it
// back with a Consumer, in order, with keys; a commit of a message the
// consumer did not fetch is refused.
func TestConsumerReadsWhatWasPublished(t *testing.T) {
	b := kafkatest.Start(t, usagetopic.Name)
	leakcheck.Check(t, "segmentio/kafka-go", "weir/internal/kafka/usagetopic.(*Publisher)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := usagetopic.NewConsumer(usagetopic.ConsumerConfig{Brokers: []string{b.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pub, err := usagetopic.NewPublisher(usagetopic.PublisherConfig{Brokers: []string{b.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	// A group new to the topic starts at its end: publish until the
	// consumer has joined and sees messages, then check what follows.
	published := make(chan error, 1)
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			if err := pub.Publish(ctx, []usagetopic.Message{{Key: []byte("instance-1"), Value: fmt.Appendf(nil, "%d", i)}}); err != nil {
				published <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		published <- nil
	}()
	var prev int
	for i := range 10 {
		m, err := c.Fetch(ctx)
		if err != nil {
			t.Fatalf("fetch %d: %v", i, err)
		}
		if string(m.Key) != "instance-1" {
			t.Fatalf("message %d: key %q, want instance-1", i, m.Key)
		}
		var n int
		if _, err := fmt.Sscan(string(m.Value), &n); err != nil {
			t.Fatalf("message %d: value %q: %v", i, m.Value, err)
		}
		if i > 0 && n != prev+1 {
			t.Fatalf("message %d is %d after %d: out of order", i, n, prev)
		}
		prev = n
		if err := c.Commit(ctx, m); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	cancel()
	if err := <-published; err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	if err := c.Commit(context.Background(), usagetopic.Message{Value: []byte("x")}); err == nil {
		t.Fatal("Commit of a message not fetched = nil, want an error")
	}
}
