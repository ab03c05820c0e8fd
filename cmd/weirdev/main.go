// Command weirdev runs one piece of Weir's backing services as a process of
// its own, for local topologies (scripts/run-cluster.sh) where no etcd or
// Kafka is installed: an embedded etcd member of a cluster, or an
// in-process Kafka-protocol cluster of several brokers (kfake). Both are
// for development and tests on loopback; production runs etcd and Kafka.
//
//	weirdev etcd --name m0 --dir DIR --client 127.0.0.1:2379 --peer 127.0.0.1:2380 \
//	    --initial-cluster m0=http://127.0.0.1:2380,m1=http://127.0.0.1:2381,m2=http://127.0.0.1:2382
//	weirdev kafka --addr 127.0.0.1:9092 --brokers 3 --partitions 6 --topics weir.usage --dir DIR
//
// It runs until SIGINT or SIGTERM; SIGKILL it to simulate a crash.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/weirhq/weir/internal/platform/embedetcd"
	"github.com/weirhq/weir/internal/platform/embedkafka"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "weirdev:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: weirdev (etcd|kafka) [flags]")
	}
	fs := flag.NewFlagSet("weirdev "+args[0], flag.ContinueOnError)
	switch args[0] {
	case "etcd":
		var cfg embedetcd.Config
		fs.StringVar(&cfg.Name, "name", "weir", "member name")
		fs.StringVar(&cfg.Dir, "dir", "", "data directory (required)")
		fs.StringVar(&cfg.ClientAddr, "client", "127.0.0.1:2379", "client host:port")
		fs.StringVar(&cfg.PeerAddr, "peer", "127.0.0.1:2380", "peer host:port")
		fs.StringVar(&cfg.InitialCluster, "initial-cluster", "", "every member as name=http://peer,... (default this member alone)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		cfg.TickMs, cfg.ElectionMs = 50, 500
		srv, err := embedetcd.Start(ctx, cfg)
		if err != nil {
			return err
		}
		defer srv.Close()
		fmt.Fprintf(os.Stderr, "weirdev: etcd member %s serving %s\n", cfg.Name, srv.Endpoint())
		select {
		case <-ctx.Done():
			return nil
		case err := <-srv.Err():
			return err
		}
	case "kafka":
		var cfg embedkafka.Config
		var topics string
		var partitions int
		fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:9092", "first broker's host:port; broker i listens on port+i")
		fs.IntVar(&cfg.Brokers, "brokers", 3, "number of brokers")
		fs.IntVar(&partitions, "partitions", 6, "partitions of each topic")
		fs.StringVar(&topics, "topics", "weir.usage", "comma-separated topics to create")
		fs.StringVar(&cfg.DataDir, "dir", "", "data directory (default: none, the log is lost on exit)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		cfg.Partitions = int32(partitions)
		cfg.Topics = strings.Split(topics, ",")
		b, err := embedkafka.Start(cfg)
		if err != nil {
			return err
		}
		defer b.Close()
		fmt.Fprintf(os.Stderr, "weirdev: %d Kafka-protocol brokers on %s\n", cfg.Brokers, strings.Join(b.Addrs(), ","))
		<-ctx.Done()
		return nil
	default:
		return fmt.Errorf("unknown command %q: want etcd or kafka", args[0])
	}
}
