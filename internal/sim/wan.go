package sim

// WAN mode (Config.WAN): the DCs sit behind an emulated WAN (package wan),
// each DC's limiter a process of its own in the DC's network namespace.
// The control plane — embedded etcd, the broker, the coordinators — stays
// in this process and listens on the core address, so that the limiters'
// etcd and Kafka traffic crosses the delaying router, while the traffic
// generators and the share sampler reach their DC's limiter from inside
// the DC's namespace, without delay.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/platform/redisproc"
	"github.com/weirhq/weir/internal/sim/simreport"
	"github.com/weirhq/weir/internal/sim/wan"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// NodeArg, as a program's first argument, asks for node mode: the
// program runs one DC's limiter as RunNode says, configured by the JSON
// of a Node in the second argument. cmd/weirsim honours it; WAN mode
// starts this process's own executable that way inside each DC's
// namespace.
const NodeArg = "__dc-node"

// readyPrefix starts the line a node prints on its standard output once
// it serves; the rest of the line is a NodeReady in JSON.
const readyPrefix = "weirsim-node-ready "

// Node configures one DC's limiter process in WAN mode.
type Node struct {
	DC  string   `json:"dc"`
	DCs []string `json:"dcs"`
	// Etcd is etcd's client URL; Kafka the broker's host:port.
	Etcd  string `json:"etcd"`
	Kafka string `json:"kafka"`
	// Interval is the reporting interval; StoreTimeout the limiter's
	// Redis call timeout.
	Interval     time.Duration `json:"interval"`
	StoreTimeout time.Duration `json:"store_timeout"`
	// Redis starts a redis-server for the DC, its files in Dir; without
	// it the DC keeps its state in memory.
	Redis bool   `json:"redis"`
	Dir   string `json:"dir"`
}

// NodeReady is what a node reports once it serves: its limiter's
// addresses (on the loopback of the DC's namespace) and whether it runs a
// redis-server.
type NodeReady struct {
	GRPC  string `json:"grpc"`
	HTTP  string `json:"http"`
	Redis bool   `json:"redis"`
}

// The commands a node reads, a line each, on its control input.
const (
	cmdPauseRedis  = "pause-redis"
	cmdResumeRedis = "resume-redis"
)

// ParseNode decodes a Node from its JSON.
func ParseNode(s string) (Node, error) {
	var n Node
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		return Node{}, fmt.Errorf("sim: node config: %w", err)
	}
	if n.DC == "" || n.Etcd == "" || n.Kafka == "" {
		return Node{}, errors.New("sim: node config: dc, etcd and kafka are required")
	}
	return n, nil
}

// RunNode runs one DC's limiter until ctx is done or control ends (EOF):
// first its redis-server when n.Redis (and one is installed), then
// limiterd.Run. It writes one ready line to ready once the limiter
// serves. It obeys the lines "pause-redis" and "resume-redis" (SIGSTOP
// and SIGCONT to the redis-server) read from control, and stops the
// redis-server before returning. The goroutine reading control lasts
// until control ends.
func RunNode(ctx context.Context, n Node, log *slog.Logger, control io.Reader, ready io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var redisAddr string
	var redis *redisproc.Server
	if n.Redis && redisproc.Binary() != "" {
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			return fmt.Errorf("sim: node %s: %w", n.DC, err)
		}
		r, err := redisproc.Start(n.Dir)
		if err != nil {
			return fmt.Errorf("sim: node %s: %w", n.DC, err)
		}
		defer func() { _ = r.Resume(); r.Stop() }()
		redis, redisAddr = r, r.Addr
	}
	go func() {
		defer cancel()
		sc := bufio.NewScanner(control)
		for sc.Scan() {
			var err error
			switch cmd := sc.Text(); {
			case redis == nil:
				err = errors.New("no redis-server")
			case cmd == cmdPauseRedis:
				err = redis.Pause()
			case cmd == cmdResumeRedis:
				err = redis.Resume()
			default:
				err = fmt.Errorf("unknown command %q", cmd)
			}
			if err != nil {
				log.Warn("node command failed", "command", sc.Text(), "err", err)
			}
		}
	}()
	return limiterd.Run(ctx, limiterd.Config{
		DC: n.DC, DCs: n.DCs, Redis: redisAddr,
		HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0",
		Etcd: []string{n.Etcd}, Kafka: []string{n.Kafka}, ReportInterval: n.Interval,
		SyncTimeout: 5 * time.Second, ShutdownGrace: time.Second, StoreTimeout: n.StoreTimeout, Logger: log,
		Ready: func(httpAddr, grpcAddr string) {
			b, _ := json.Marshal(NodeReady{GRPC: grpcAddr, HTTP: httpAddr, Redis: redis != nil})
			fmt.Fprintf(ready, "%s%s\n", readyPrefix, b)
		},
	})
}

// wanWorld is a world's WAN: the network and the DCs' node processes.
type wanWorld struct {
	net *wan.Net
	// links are the delays emulated and the round trips measured between
	// the DCs when the network came up, for the report.
	links []simreport.WANLink

	mu    sync.Mutex
	nodes map[string]*node
}

// node is one DC's limiter process.
type node struct {
	cmd    *exec.Cmd
	redis  bool
	exited chan struct{}

	mu      sync.Mutex
	control io.WriteCloser // the node's standard input
}

// send writes a command line to the node.
func (nd *node) send(cmd string) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	_, err := io.WriteString(nd.control, cmd+"\n")
	return err
}

// upWAN builds the network for the world's DCs.
func (w *world) upWAN(ctx context.Context) error {
	cfg := *w.cfg.WAN
	cfg.DCs = w.cfg.DCs
	if cfg.Logger == nil {
		cfg.Logger = w.log
	}
	n, err := wan.Up(ctx, cfg)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	w.wan = &wanWorld{net: n, nodes: map[string]*node{}, links: measureWAN(ctx, n)}
	for _, l := range w.wan.links {
		w.log.Info("WAN link", "a", l.A, "b", l.B, "delay", l.Delay, "rtt", l.RTT, "err", l.Error)
	}
	return nil
}

// measureWAN measures the round trip between every pair of DCs, before
// any traffic, so that the report can show the delay was applied.
func measureWAN(ctx context.Context, n *wan.Net) []simreport.WANLink {
	dcs := n.DCs()
	var links []simreport.WANLink
	for i := range dcs {
		for j := i + 1; j < len(dcs); j++ {
			l := simreport.WANLink{A: dcs[i], B: dcs[j], Delay: n.Delay(dcs[i], dcs[j])}
			mctx, cancel := context.WithTimeout(ctx, 5*time.Second+20*l.Delay)
			rtt, err := n.RTT(mctx, dcs[i], dcs[j], 5)
			cancel()
			if err != nil {
				l.Error = err.Error()
			}
			l.RTT = rtt
			links = append(links, l)
		}
	}
	return links
}

// listenAddr is where the control plane listens: a free port on loopback,
// or on the core address in WAN mode.
func (w *world) listenAddr() string {
	if w.wan != nil {
		return net.JoinHostPort(w.wan.net.CoreAddr().String(), "0")
	}
	return "127.0.0.1:0"
}

// startNode starts DC name's limiter process in its namespace, waits for
// it to serve and connects to it from inside the namespace.
func (w *world) startNode(ctx context.Context, name string, useRedis bool) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("sim: node %s: %w", name, err)
	}
	w.mu.Lock()
	kafka := w.kafka
	w.mu.Unlock()
	cfg, _ := json.Marshal(Node{
		DC: name, DCs: w.cfg.DCs, Etcd: w.etcd.Endpoint(), Kafka: kafka,
		Interval: w.cfg.Interval, StoreTimeout: w.cfg.StoreTimeout, Redis: useRedis, Dir: filepath.Join(w.dir, "redis-"+name),
	})
	cmd := w.wan.net.Command(context.Background(), name, exe, NodeArg, string(cfg))
	// Its own process group: a ^C on the terminal is for weirsim, which
	// stops the nodes in order. Killed if weirsim dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("sim: node %s: %w", name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("sim: node %s: %w", name, err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("sim: node %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sim: node %s: %w", name, err)
	}
	nd := &node{cmd: cmd, exited: make(chan struct{}), control: stdin}
	var out sync.WaitGroup
	readyc := make(chan NodeReady, 1)
	out.Go(func() { w.nodeLog(name, stderr) })
	out.Go(func() { scanReady(stdout, readyc) })
	go func() { out.Wait(); _ = cmd.Wait(); close(nd.exited) }()
	w.mu.Lock()
	w.stops = append(w.stops, func() { stopNode(nd) })
	w.mu.Unlock()

	var ready NodeReady
	select {
	case ready = <-readyc:
	case <-nd.exited:
		return fmt.Errorf("sim: node %s exited before serving: %v", name, cmd.ProcessState)
	case <-time.After(30 * time.Second):
		return fmt.Errorf("sim: node %s did not start", name)
	case <-ctx.Done():
		return ctx.Err()
	}
	nd.redis = ready.Redis
	w.wan.mu.Lock()
	w.wan.nodes[name] = nd
	w.wan.mu.Unlock()

	dial := w.wan.net.DialContext(name)
	conn, err := grpc.NewClient("passthrough:///"+ready.GRPC,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dial(ctx, "tcp", addr) }))
	if err != nil {
		return fmt.Errorf("sim: node %s: %w", name, err)
	}
	w.mu.Lock()
	w.stops = append(w.stops, func() { conn.Close() })
	w.dcs[name] = &dc{name: name, client: weirv1.NewLimiterClient(conn)}
	w.mu.Unlock()
	return nil
}

// scanReady sends the node's ready line on readyc and drains the rest.
func scanReady(r io.Reader, readyc chan<- NodeReady) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), readyPrefix)
		if !ok {
			continue
		}
		var nr NodeReady
		if json.Unmarshal([]byte(line), &nr) == nil {
			select {
			case readyc <- nr:
			default:
			}
		}
	}
}

// nodeLog passes the node's log lines on to the world's logger.
func (w *world) nodeLog(name string, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		w.log.Info("node", "dc", name, "line", sc.Text())
	}
}

// stopNode asks a node to stop (its standard input closes, SIGTERM) and
// kills it if it has not within 10 s; it returns once it has exited.
func stopNode(nd *node) {
	nd.mu.Lock()
	nd.control.Close()
	nd.mu.Unlock()
	_ = nd.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-nd.exited:
	case <-time.After(10 * time.Second):
		_ = nd.cmd.Process.Kill()
		<-nd.exited
	}
}

// applyWAN applies the faults that WAN mode injects differently: a
// partition takes the DC's link down, pause-redis asks the node to
// stop its redis-server. It reports whether f was one of them.
func (w *world) applyWAN(ctx context.Context, f Fault) (bool, error) {
	switch f.Kind {
	case "partition":
		if err := w.wan.net.Partition(f.DC, true); err != nil {
			return true, err
		}
		w.after(ctx, f.For, func() {
			if err := w.wan.net.Partition(f.DC, false); err != nil {
				w.log.Warn("partition not healed", "dc", f.DC, "err", err)
			}
		})
		return true, nil
	case "pause-redis":
		w.wan.mu.Lock()
		nd := w.wan.nodes[f.DC]
		w.wan.mu.Unlock()
		if nd == nil || !nd.redis {
			return true, fmt.Errorf("DC %q has no redis-server", f.DC)
		}
		if err := nd.send(cmdPauseRedis); err != nil {
			return true, err
		}
		w.after(ctx, f.For, func() { _ = nd.send(cmdResumeRedis) })
		return true, nil
	}
	return false, nil
}

// closeWAN removes the network, after every other component has
// stopped, and logs what its router carried.
func (w *world) closeWAN() {
	st := w.wan.net.Stats()
	for p, s := range st.Paths {
		w.log.Info("wan path", "from", p.From, "to", p.To, "forwarded", s.Forwarded, "dropped", s.Dropped)
	}
	if err := w.wan.net.Close(); err != nil {
		w.log.Error("wan not removed cleanly", "err", err)
		if w.cfg.Live != nil {
			fmt.Fprintln(w.cfg.Live, "sim: WAN not removed cleanly:", err)
		}
	}
}
