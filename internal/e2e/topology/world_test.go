package topology_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/control/coordinator"
	"github.com/weirhq/weir/internal/control/planner"
	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/kafka/usagetopic"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/rulefile"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

const (
	interval = 500 * time.Millisecond
	ttl      = 3 * time.Second
	limit    = 400 // rule "total", per second
)

// rulesYAML is one global rule; its failure mode is set per test.
const rulesYAML = `domain: api
rules:
  - rule_id: total
    path_pattern: /total
    limit: 400
    window_seconds: 1
    algorithm: SlidingWindowLog
    failure_mode: %s
`

var layout etcdlayout.Layout

// writeRules writes the rule file and returns its path and rules.
func writeRules(t *testing.T, failureMode string) (string, []rule.Rule) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, rulesYAML, failureMode), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := rulefile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var rules []rule.Rule
	for _, r := range set.Rules {
		r.SetDefaults()
		r.Domain = set.Domain
		rules = append(rules, r)
	}
	return path, rules
}

// coord is a coordinator run in the test process.
type coord struct {
	c      *coordinator.Coordinator
	etcd   *clientv3.Client
	cancel context.CancelFunc
	done   chan struct{}
}

// startCoordinator starts a coordinator on etcd (a client of every member)
// and the brokers.
func startCoordinator(t *testing.T, cli *clientv3.Client, brokers []string, name string, dcs []string, rules []rule.Rule) *coord {
	t.Helper()
	c, err := coordinator.New(coordinator.Config{
		Etcd: cli, Name: name,
		Planner: planner.Config{DCs: dcs, Interval: interval, TTL: ttl},
		Rules:   func() []rule.Rule { return rules },
		NewSource: func(context.Context) (coordinator.Source, error) {
			return usagetopic.NewConsumer(usagetopic.ConsumerConfig{Brokers: brokers})
		},
		SessionTTL: 1, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	co := &coord{c: c, etcd: cli, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(co.done); c.Run(ctx) }()
	t.Cleanup(co.stop)
	return co
}

func (c *coord) stop() {
	c.cancel()
	<-c.done
}

// crash stops c as a killed process would: its etcd connection goes first,
// so it neither resigns nor revokes its session.
func (c *coord) crash() {
	c.etcd.Close()
	c.stop()
}

func leader(coords []*coord) *coord {
	for _, c := range coords {
		if c.c.Leader() {
			return c
		}
	}
	return nil
}

// limiterProc is one limiter instance run in the test process.
type limiterProc struct {
	dc, name string
	client   weirv1.LimiterClient
	cancel   context.CancelFunc
	done     chan error
	stopped  atomic.Bool
}

// startLimiter starts limiter instance name of dc on the given store
// (empty: memory), etcd and brokers.
func startLimiter(t *testing.T, dc, name string, dcs []string, redis, rulesPath string, etcd, brokers []string) *limiterProc {
	t.Helper()
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	l := &limiterProc{dc: dc, name: name, cancel: cancel, done: make(chan error, 1)}
	go func() {
		l.done <- limiterd.Run(ctx, limiterd.Config{
			DC: dc, DCs: dcs, Redis: redis, RulesFile: rulesPath, Instance: name,
			HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0",
			Etcd: etcd, Kafka: brokers, ReportInterval: interval,
			Logger: slog.New(slog.DiscardHandler), Ready: func(_, grpcAddr string) { ready <- grpcAddr },
		})
	}()
	t.Cleanup(l.stop)
	var addr string
	select {
	case addr = <-ready:
	case err := <-l.done:
		t.Fatalf("limiter %s: %v", name, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("limiter %s did not start", name)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	l.client = weirv1.NewLimiterClient(conn)
	return l
}

// stop stops the limiter (as its process ending would, lease revoked);
// stopping twice is harmless.
func (l *limiterProc) stop() {
	if l.stopped.Swap(true) {
		return
	}
	l.cancel()
	<-l.done
}

// localLimit asks the limiter for its local limit of rule "total"; 0 on
// error.
func (l *limiterProc) localLimit(ctx context.Context) int64 {
	resp, err := l.client.Status(ctx, &weirv1.StatusRequest{Domain: "api", RuleId: "total"})
	if err != nil {
		return 0
	}
	return resp.GetResult().GetLimit()
}

// check sends one request of rule "total"; ok is false when the call
// failed.
func (l *limiterProc) check(ctx context.Context) (allowed, ok bool) {
	resp, err := l.client.Check(ctx, &weirv1.CheckRequest{Domain: "api", Items: []*weirv1.CheckItem{{Attributes: map[string]string{"path": "/total"}, Hits: 1}}})
	if err != nil {
		return false, false
	}
	return resp.GetAllowed(), true
}

// rates is a concurrency-safe map of request rates per DC.
type rates struct {
	mu sync.Mutex
	m  map[string]float64
}

func (r *rates) set(m map[string]float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m = m
}

func (r *rates) of(dc string) func() float64 {
	return func() float64 {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.m[dc]
	}
}

// ackedUpTo waits until every instance record of each DC says it applied
// at least the newest revision of the DC's documents as read now, and
// returns how long that took. That is the "no missed assignment" check:
// an instance whose watch lost an event would hold its applied revision
// below it.
func ackedUpTo(ctx context.Context, t *testing.T, cli *clientv3.Client, dcs []string, instances map[string]int, d time.Duration) time.Duration {
	t.Helper()
	want := map[string]int64{}
	for _, dc := range dcs {
		resp, err := cli.Get(ctx, layout.DCQuotas(dc), clientv3.WithPrefix())
		if err != nil {
			t.Fatalf("read %s's documents: %v", dc, err)
		}
		for _, kv := range resp.Kvs {
			want[dc] = max(want[dc], kv.ModRevision)
		}
		if want[dc] == 0 {
			t.Fatalf("no documents for DC %s", dc)
		}
	}
	start := time.Now()
	var last string
	for {
		ok := true
		last = ""
		for _, dc := range dcs {
			resp, err := cli.Get(ctx, layout.Instances()+dc+"/", clientv3.WithPrefix())
			if err != nil {
				ok, last = false, err.Error()
				break
			}
			if len(resp.Kvs) != instances[dc] {
				ok = false
				last += fmt.Sprintf("%s has %d instance records, want %d; ", dc, len(resp.Kvs), instances[dc])
			}
			for _, kv := range resp.Kvs {
				var rec weirv1.InstanceRecord
				if err := proto.Unmarshal(kv.Value, &rec); err != nil {
					t.Fatalf("instance record %s: %v", kv.Key, err)
				}
				if rec.GetAppliedRevision() < want[dc] {
					ok = false
					last += fmt.Sprintf("%s applied %d, want ≥ %d; ", kv.Key, rec.GetAppliedRevision(), want[dc])
				}
			}
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("after %v: %s", d, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
