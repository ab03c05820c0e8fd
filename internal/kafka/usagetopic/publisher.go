package usagetopic

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
)

// Defaults for the zero fields of PublisherConfig.
const (
	DefaultWriteTimeout = 5 * time.Second
	DefaultBatchTimeout = 10 * time.Millisecond
	DefaultDialTimeout  = 3 * time.Second
	DefaultMaxAttempts  = 3
	DefaultClientID     = "weir-limiter"
)

// PublisherConfig configures a Publisher. Brokers is required.
type PublisherConfig struct {
	// Brokers are the host:port addresses of bootstrap brokers. Required.
	Brokers []string
	// Topic is the topic written to; it is created if missing and the
	// cluster allows it. Default Name ("weir.usage").
	Topic string
	// WriteTimeout bounds each produce request and each wait for its
	// response. Default DefaultWriteTimeout (5s).
	WriteTimeout time.Duration
	// BatchTimeout is how long the writer waits for more messages before
	// sending a partial batch. Default DefaultBatchTimeout (10ms).
	BatchTimeout time.Duration
	// DialTimeout bounds connecting to a broker. Default
	// DefaultDialTimeout (3s).
	DialTimeout time.Duration
	// MaxAttempts is how many times one Publish tries each batch before
	// failing; the limiter's usage reporter retries failed Publish calls
	// itself.
	// Default DefaultMaxAttempts (3).
	MaxAttempts int
	// ClientID names the client to the brokers. Default DefaultClientID.
	ClientID string
	// TLS, if not nil, secures the connections.
	TLS *tls.Config
}

// Validate reports whether c is usable.
func (c PublisherConfig) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New("usagetopic: PublisherConfig.Brokers is required")
	case c.WriteTimeout < 0 || c.BatchTimeout < 0 || c.DialTimeout < 0:
		return errors.New("usagetopic: negative WriteTimeout, BatchTimeout or DialTimeout")
	case c.MaxAttempts < 0:
		return fmt.Errorf("usagetopic: negative MaxAttempts %d", c.MaxAttempts)
	}
	for _, b := range c.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return fmt.Errorf("usagetopic: broker address %q: %w", b, err)
		}
	}
	return nil
}

// Publisher writes usage messages to a Kafka topic. Safe for concurrent
// use; create it with NewPublisher and release it with Close.
type Publisher struct {
	topic     string
	w         *kafka.Writer
	transport *kafka.Transport
	cancel    context.CancelFunc
}

// maxBatchBytes bounds a produce request: twice the limiter's largest
// report message (512 KiB), and at least 1 MiB.
const maxBatchBytes = 1 << 20

// NewPublisher returns a Publisher; it connects on the first Publish.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Topic == "" {
		cfg.Topic = Name
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.BatchTimeout == 0 {
		cfg.BatchTimeout = DefaultBatchTimeout
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.ClientID == "" {
		cfg.ClientID = DefaultClientID
	}
	// A transport of its own, whose background goroutines Close stops,
	// rather than kafka-go's process-wide default.
	ctx, cancel := context.WithCancel(context.Background())
	t := &kafka.Transport{
		DialTimeout: cfg.DialTimeout,
		ClientID:    cfg.ClientID,
		TLS:         cfg.TLS,
		Context:     ctx,
	}
	w := &kafka.Writer{
		Addr:                   kafka.TCP(cfg.Brokers...),
		Topic:                  cfg.Topic,
		Balancer:               &kafka.Hash{},
		MaxAttempts:            cfg.MaxAttempts,
		BatchTimeout:           cfg.BatchTimeout,
		BatchBytes:             maxBatchBytes,
		ReadTimeout:            cfg.WriteTimeout,
		WriteTimeout:           cfg.WriteTimeout,
		RequiredAcks:           kafka.RequireOne,
		AllowAutoTopicCreation: true,
		Transport:              t,
	}
	return &Publisher{topic: cfg.Topic, w: w, transport: t, cancel: cancel}, nil
}

// Publish writes msgs to the topic, in order, and returns once the
// partition leaders have acknowledged all of them, or the first error. On
// an error some messages may have been written. It neither modifies msgs
// nor keeps them.
func (p *Publisher) Publish(ctx context.Context, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	km := make([]kafka.Message, len(msgs))
	for i, m := range msgs {
		km[i] = kafka.Message{Key: m.Key, Value: m.Value}
	}
	if err := p.w.WriteMessages(ctx, km...); err != nil {
		return fmt.Errorf("usagetopic: write %d messages to topic %q: %w", len(msgs), p.topic, err)
	}
	return nil
}

// Close waits for writes in progress, then closes the connections.
// Publish fails after Close.
func (p *Publisher) Close() error {
	err := p.w.Close()
	p.transport.CloseIdleConnections()
	p.cancel()
	if err != nil {
		return fmt.Errorf("usagetopic: close writer: %w", err)
	}
	return nil
}
