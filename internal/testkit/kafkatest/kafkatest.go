// Package kafkatest starts an in-process Kafka-protocol broker (kfake,
// through package embedkafka) for tests, on a free loopback port, or a
// cluster of several brokers, each on its own port, among which the
// partitions' leadership and the consumer groups are spread.
package kafkatest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/weirhq/weir/internal/platform/embedkafka"
)

// Broker is a broker owned by a test; it stops when the test ends.
type Broker struct {
	t      testing.TB
	cfg    embedkafka.Config
	mu     sync.Mutex
	broker *embedkafka.Broker
	addrs  []string
}

// Start starts a broker for t with the given topics (3 partitions each).
// Its log is kept in a temporary directory, so Restart keeps messages and
// committed offsets.
func Start(t testing.TB, topics ...string) *Broker {
	t.Helper()
	b := &Broker{t: t, cfg: embedkafka.Config{Addr: "127.0.0.1:0", Topics: topics, DataDir: t.TempDir()}}
	b.start()
	b.cfg.Addr = b.broker.Addr()
	t.Cleanup(b.Close)
	return b
}

// StartCluster starts a cluster of n brokers for t with the given topics
// (partitions partitions each), on free loopback ports. It cannot be
// restarted.
func StartCluster(t testing.TB, n int, partitions int32, topics ...string) *Broker {
	t.Helper()
	b := &Broker{t: t, cfg: embedkafka.Config{Addr: "127.0.0.1:0", Brokers: n, Partitions: partitions, Topics: topics}}
	b.start()
	t.Cleanup(b.Close)
	return b
}

func (b *Broker) start() {
	b.t.Helper()
	br, err := embedkafka.Start(b.cfg)
	if err != nil {
		b.t.Fatalf("kafkatest: %v", err)
	}
	b.mu.Lock()
	b.broker = br
	b.addrs = br.Addrs()
	b.mu.Unlock()
}

// Addr is the (first) broker's host:port.
func (b *Broker) Addr() string { return b.Addrs()[0] }

// Addrs are every broker's host:port.
func (b *Broker) Addrs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.addrs...)
}

// PartitionLeaders returns the broker id leading each of topic's first
// partitions partitions.
func (b *Broker) PartitionLeaders(topic string, partitions int32) []int32 {
	b.mu.Lock()
	br := b.broker
	b.mu.Unlock()
	return br.PartitionLeaders(topic, partitions)
}

// Close stops the broker; closing twice is harmless.
func (b *Broker) Close() {
	b.mu.Lock()
	br := b.broker
	b.broker = nil
	b.mu.Unlock()
	if br != nil {
		br.Close()
	}
}

// Restart starts a stopped one-broker cluster again on the same address
// with its log.
func (b *Broker) Restart() {
	b.t.Helper()
	if b.cfg.Brokers > 1 {
		b.t.Fatal("kafkatest: a cluster of several brokers cannot be restarted")
	}
	b.Close()
	b.start()
}

// Read reads the first n messages of topic from the broker, as a consumer
// group of its own starting at the topic's beginning; it fails t after 30s.
func (b *Broker) Read(t testing.TB, topic string, n int) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: b.Addrs(), GroupID: "kafkatest-read", Topic: topic, StartOffset: kafka.FirstOffset,
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
