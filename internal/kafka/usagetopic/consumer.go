package usagetopic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// DefaultGroup is the coordinators' consumer group unless configured
// otherwise.
const DefaultGroup = "weir-coordinator"

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	// Brokers are host:port addresses; required.
	Brokers []string
	// Topic is the usage topic. Default Name ("weir.usage").
	Topic string
	// Group is the consumer group. Default DefaultGroup.
	Group string
}

// Consumer reads the usage topic as a member of a consumer group, over a
// kafka-go reader. Only the leading coordinator is a member of the group,
// so it receives every partition; a new leader resumes from the committed
// offsets. A group new to the topic starts at its end: older reports are
// too late to matter. A Consumer is used by one goroutine at a time.
type Consumer struct {
	r *kafka.Reader
}

// NewConsumer returns a consumer joined to the group. It does not dial:
// the first Fetch does.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("usagetopic: no Kafka brokers")
	}
	if cfg.Topic == "" {
		cfg.Topic = Name
	}
	if cfg.Group == "" {
		cfg.Group = DefaultGroup
	}
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           cfg.Brokers,
		Topic:             cfg.Topic,
		GroupID:           cfg.Group,
		StartOffset:       kafka.LastOffset,
		MinBytes:          1,
		MaxBytes:          MaxMessageBytes * 2,
		MaxWait:           100 * time.Millisecond,
		CommitInterval:    200 * time.Millisecond,
		HeartbeatInterval: 500 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		// A new leader joining the group waits up to the rebalance
		// timeout for the members already in it to rejoin; a killed
		// leader never does, and every interval closed meanwhile is
		// blind. Only the leader is meant to be a member, so a short
		// timeout costs nothing (Kafka has no lower bound for it, unlike
		// the session timeout's group.min.session.timeout.ms of 6s).
		RebalanceTimeout: time.Second,
		JoinGroupBackoff: 200 * time.Millisecond,
		ReadBackoffMin:   50 * time.Millisecond,
		ReadBackoffMax:   time.Second,
		MaxAttempts:      3,
	})
	return &Consumer{r: r}, nil
}

// Fetch blocks for the next message, until ctx is done.
func (s *Consumer) Fetch(ctx context.Context) (Message, error) {
	m, err := s.r.FetchMessage(ctx)
	if err != nil {
		return Message{}, fmt.Errorf("usagetopic: fetch: %w", err)
	}
	return Message{Key: m.Key, Value: m.Value, fetched: &m}, nil
}

// Commit marks m processed; commits are sent in the background every
// 200 ms.
func (s *Consumer) Commit(ctx context.Context, m Message) error {
	if m.fetched == nil {
		return errors.New("usagetopic: commit of a message not fetched")
	}
	if err := s.r.CommitMessages(ctx, *m.fetched); err != nil {
		return fmt.Errorf("usagetopic: commit: %w", err)
	}
	return nil
}

// Close leaves the group, committing what was marked.
func (s *Consumer) Close() error { return s.r.Close() }
