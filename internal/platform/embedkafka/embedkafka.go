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
	// picks a free port.
	Addr string
	// Topics are created at start, each with Partitions partitions
	// (default 3). Other topics are created when first used.
	Topics     []string
	Partitions int32
	// DataDir, when set, persists the log so that a broker restarted on the
	// same directory keeps its messages and committed offsets.
	DataDir string
}

// Broker is a running in-process broker. Close stops it.
type Broker struct {
	cluster *kfake.Cluster
	addr    string
}

// Start starts a broker.
func Start(cfg Config) (*Broker, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:9092"
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 3
	}
	host, portText, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("embedkafka: address %q: %w", cfg.Addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("embedkafka: address %q: bad port", cfg.Addr)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(int(cfg.Partitions)),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
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
	return &Broker{cluster: c, addr: addrs[0]}, nil
}

// Addr is the broker's host:port.
func (b *Broker) Addr() string { return b.addr }

// Close stops the broker; with a DataDir the log stays on disk.
func (b *Broker) Close() { b.cluster.Close() }
