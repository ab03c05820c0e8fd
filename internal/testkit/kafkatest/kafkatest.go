// Package kafkatest starts an in-process Kafka-protocol broker (kfake,
// through package embedkafka) for tests, on a free loopback port.
package kafkatest

import (
	"sync"
	"testing"

	"github.com/weirhq/weir/internal/platform/embedkafka"
)

// Broker is a broker owned by a test; it stops when the test ends.
type Broker struct {
	t      testing.TB
	cfg    embedkafka.Config
	mu     sync.Mutex
	broker *embedkafka.Broker
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

func (b *Broker) start() {
	b.t.Helper()
	br, err := embedkafka.Start(b.cfg)
	if err != nil {
		b.t.Fatalf("kafkatest: %v", err)
	}
	b.mu.Lock()
	b.broker = br
	b.mu.Unlock()
}

// Addr is the broker's host:port.
func (b *Broker) Addr() string { return b.cfg.Addr }

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

// Restart starts a stopped broker again on the same address with its log.
func (b *Broker) Restart() {
	b.t.Helper()
	b.Close()
	b.start()
}
