package kafkatest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// kafka-go's writer and consumer-group reader work against the broker, and a
// new group member resumes from the committed offsets, across a restart.
func TestKafkaGoConsumerGroup(t *testing.T) {
	b := Start(t, "events")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := &kafka.Writer{Addr: kafka.TCP(b.Addr()), Topic: "events", Balancer: &kafka.Hash{}, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireOne}
	defer w.Close()
	write := func(from, to int) {
		for i := from; i < to; i++ {
			if err := w.WriteMessages(ctx, kafka.Message{Key: fmt.Appendf(nil, "k%d", i%7), Value: fmt.Appendf(nil, "%d", i)}); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		}
	}
	read := func(n int) map[string]bool {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{b.Addr()}, GroupID: "g", Topic: "events", MaxWait: 50 * time.Millisecond, HeartbeatInterval: 200 * time.Millisecond, SessionTimeout: 6 * time.Second})
		defer r.Close()
		seen := map[string]bool{}
		for len(seen) < n {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Fatalf("fetch after %d: %v", len(seen), err)
			}
			seen[string(m.Value)] = true
			if err := r.CommitMessages(ctx, m); err != nil {
				t.Fatalf("commit: %v", err)
			}
		}
		return seen
	}
	write(0, 20)
	if got := read(20); !got["0"] || !got["19"] {
		t.Fatalf("first read: %v", got)
	}
	b.Restart()
	write(20, 30)
	got := read(10)
	for i := 20; i < 30; i++ {
		if !got[fmt.Sprint(i)] {
			t.Errorf("message %d not read after restart; read %v", i, got)
		}
	}
	for i := 0; i < 20; i++ {
		if got[fmt.Sprint(i)] {
			t.Errorf("message %d read again: committed offsets lost", i)
		}
	}
}

// A three-broker cluster spreads the partitions' leadership among its
// brokers, and kafka-go clients given every broker write to and read from
// all of them.
func TestCluster(t *testing.T) {
	b := StartCluster(t, 3, 6, "events")
	if got := len(b.Addrs()); got != 3 {
		t.Fatalf("got %d broker addresses, want 3", got)
	}
	leaders := map[int32]bool{}
	for _, l := range b.PartitionLeaders("events", 6) {
		leaders[l] = true
	}
	if len(leaders) < 2 {
		t.Fatalf("partitions led by brokers %v, want at least two brokers", leaders)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), Topic: "events", Balancer: &kafka.RoundRobin{}, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireOne}
	defer w.Close()
	const n = 60
	for i := range n {
		if err := w.WriteMessages(ctx, kafka.Message{Value: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	partitions := map[int]bool{}
	for _, m := range b.Read(t, "events", n) {
		partitions[m.Partition] = true
	}
	if len(partitions) != 6 {
		t.Errorf("read from partitions %v, want all 6", partitions)
	}
}
