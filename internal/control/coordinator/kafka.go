package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// KafkaConfig configures the usage consumer.
type KafkaConfig struct {
	// Brokers are host:port addresses; required.
	Brokers []string
	// Topic is the usage topic. Default "weir.usage".
	Topic string
	// Group is the consumer group. Default "weir-coordinator".
	Group string
}

// DefaultTopic is the usage topic unless configured otherwise.
const DefaultTopic = "weir.usage"

// KafkaSource is a Source over a kafka-go consumer-group reader. Only the
// leader is a member of the group, so it receives every partition; a new
// leader resumes from the committed offsets. A group new to the topic starts
// at its end: older reports are too late to matter.
type KafkaSource struct {
	r *kafka.Reader
}

// NewKafkaSource returns a source joined to the group. It does not dial:
// the first Fetch does.
func NewKafkaSource(cfg KafkaConfig) (*KafkaSource, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("coordinator: no Kafka brokers")
	}
	if cfg.Topic == "" {
		cfg.Topic = DefaultTopic
	}
	if cfg.Group == "" {
		cfg.Group = "weir-coordinator"
	}
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           cfg.Brokers,
		Topic:             cfg.Topic,
		GroupID:           cfg.Group,
		StartOffset:       kafka.LastOffset,
		MinBytes:          1,
		MaxBytes:          MaxReportBytes * 2,
		MaxWait:           100 * time.Millisecond,
		CommitInterval:    200 * time.Millisecond,
		HeartbeatInterval: 500 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		RebalanceTimeout:  5 * time.Second,
		JoinGroupBackoff:  200 * time.Millisecond,
		ReadBackoffMin:    50 * time.Millisecond,
		ReadBackoffMax:    time.Second,
		MaxAttempts:       3,
	})
	return &KafkaSource{r: r}, nil
}

// Fetch returns the next message.
func (s *KafkaSource) Fetch(ctx context.Context) (Message, error) {
	m, err := s.r.FetchMessage(ctx)
	if err != nil {
		return Message{}, fmt.Errorf("kafka fetch: %w", err)
	}
	return Message{Value: m.Value, Handle: m}, nil
}

// Commit marks m processed; commits are sent in the background every
// 200 ms.
func (s *KafkaSource) Commit(ctx context.Context, m Message) error {
	km, ok := m.Handle.(kafka.Message)
	if !ok {
		return errors.New("coordinator: commit of a message from another source")
	}
	if err := s.r.CommitMessages(ctx, km); err != nil {
		return fmt.Errorf("kafka commit: %w", err)
	}
	return nil
}

// Close leaves the group, committing what was marked.
func (s *KafkaSource) Close() error { return s.r.Close() }
