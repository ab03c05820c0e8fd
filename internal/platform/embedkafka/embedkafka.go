// Package embedkafka runs a Kafka-protocol broker inside the process:
// github.com/twmb/franz-go/pkg/kfake, which kafka-go clients reach over TCP
// like any broker. It backs `coordinator --dev` and the tests (package
// kafkatest); production uses a real Kafka.
package embedkafka

import (
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Config configures a broker.
type Config struct {
	// Addr is the host:port to listen on. Default 127.0.0.1:9092; port 0
	// picks a free port. With several Brokers, broker i listens on port
	// +i (or a free port each when the port is 0).
	Addr string
	// Brokers is the number of brokers of the cluster, each with its own
	// listener; partition leadership is spread among them. Default 1.
	Brokers int
	// Topics are created at start, each with Partitions partitions
	// (default 3). Other topics are created when first used.
	Topics     []string
	Partitions int32
	// DataDir, when set, persists the log so that a broker restarted on the
	// same directory keeps its messages and committed offsets.
	DataDir string
}

// Broker is a running in-process broker, or cluster of brokers. Close
// stops it.
type Broker struct {
	cluster *kfake.Cluster
	addrs   []string
}

// Start starts a broker.
func Start(cfg Config) (*Broker, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:9092"
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 3
	}
	if cfg.Brokers <= 0 {
		cfg.Brokers = 1
	}
	host, portText, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("embedkafka: address %q: %w", cfg.Addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("embedkafka: address %q: bad port", cfg.Addr)
	}
	ports := make([]int, cfg.Brokers)
	for i := range ports {
		if port != 0 {
			ports[i] = port + i
		}
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(cfg.Brokers),
		kfake.Ports(ports...),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(int(cfg.Partitions)),
		// kfake listens on 127.0.0.1:port; keep the port, use our host.
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			_, p, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			return net.Listen(network, net.JoinHostPort(host, p))
		}),
	}
	if len(cfg.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(cfg.Partitions, cfg.Topics...))
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedkafka: start on %s: %w", cfg.Addr, err)
	}
	addrs := c.ListenAddrs()
	if len(addrs) == 0 {
		c.Close()
		return nil, fmt.Errorf("embedkafka: broker on %s has no listener", cfg.Addr)
	}
	return &Broker{cluster: c, addrs: addrs}, nil
}

// Addr is the first broker's host:port.
func (b *Broker) Addr() string { return b.addrs[0] }

// Addrs are every broker's host:port, by broker id.
func (b *Broker) Addrs() []string { return append([]string(nil), b.addrs...) }

// PartitionLeaders returns the broker id leading each partition of topic.
func (b *Broker) PartitionLeaders(topic string, partitions int32) []int32 {
	out := make([]int32, partitions)
	for p := range partitions {
		out[p] = b.cluster.LeaderFor(topic, p)
	}
	return out
}

// GroupCoordinator returns the broker id coordinating the consumer group.
func (b *Broker) GroupCoordinator(group string) int32 { return b.cluster.CoordinatorFor(group) }

// Close stops the broker; with a DataDir the log stays on disk.
func (b *Broker) Close() { b.cluster.Close() }
