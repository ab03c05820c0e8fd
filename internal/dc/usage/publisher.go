package usage

import (
	"context"

	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Message is one Kafka message: a marshalled weir.v1.UsageReport keyed by
// the reporting instance, so that an instance's reports stay in order in
// one partition.
type Message struct {
	Key, Value []byte
}

// Publisher sends messages to the usage topic; limiterd adapts the Kafka
// one of internal/kafka/usagetopic.
type Publisher interface {
	// Publish writes msgs, in order, and returns nil only once all of them
	// are stored. After an error the Reporter calls it again with the same
	// messages, so some may be stored twice: the coordinator counts each
	// (instance, sequence) once. Publish must return when ctx is done, and
	// must neither modify msgs nor keep them after it returns.
	Publish(ctx context.Context, msgs []Message) error
}

// Progress tells how far the instance has applied its DC's assignments.
// The limiter's assignment watcher implements it.
type Progress interface {
	// Applied returns the highest assignment epoch applied (0: none) and
	// the etcd revision up to which the DC's assignments are in force.
	Applied() (epoch uint64, revision int64)
}

// Meter reads what the DC has consumed of a global rule, for the readings
// that make the coordinator's shares usage-aware (docs/architecture.md,
// "Usage-aware limits").
type Meter interface {
	// Consumed returns what the DC had consumed when called, in units of
	// the limit, in the window as the rule's algorithm counts it: of the
	// rule (key "", a rule without key dimensions) or of one key. It
	// consumes nothing. ok is false when the count is unknown: the store
	// did not answer, the algorithm's reading is not usable, or the key
	// had no room left (it may then have consumed more than its limit).
	Consumed(ctx context.Context, domain, ruleID, key string) (consumed int64, ok bool)
}

// Flusher hands over the usage counted since its last call; Aggregator
// implements it.
type Flusher interface {
	Flush() []*weirv1.RuleUsage
}
