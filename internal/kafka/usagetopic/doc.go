// Package usagetopic is the Kafka topic of usage reports, both ends of it:
// the Publisher the limiters write their reports with and the Consumer the
// leading coordinator reads them with, over segmentio/kafka-go, with the
// topic's one default name. It is shared by the limiter side (internal/dc)
// and the control plane (internal/control), and imports neither: each side
// adapts it to its own interfaces.
//
// A message is a marshalled weir.v1.UsageReport keyed by the reporting
// instance, so that the publisher's hash balancer keeps an instance's
// reports in order in one partition.
package usagetopic

import "github.com/segmentio/kafka-go"

// Name is the usage topic unless configured otherwise.
const Name = "weir.usage"

// MaxMessageBytes bounds a usage report message: the coordinator skips
// larger ones, and the consumer fetches at most twice this at once.
const MaxMessageBytes = 4 << 20

// Message is one message of the topic. Key is the reporting instance and
// Value a marshalled weir.v1.UsageReport. A Message the Consumer fetched
// also remembers where it came from, for Commit.
type Message struct {
	Key, Value []byte
	fetched    *kafka.Message
}
