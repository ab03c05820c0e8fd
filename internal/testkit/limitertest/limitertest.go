// Package limitertest starts limiters for the tests of their clients: a
// weir.v1 server over a limiter the test built (Serve), or a whole
// limiter process run in-process (Start), which can be stopped and
// started again on the same addresses.
package limitertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"

	"github.com/weirhq/weir/internal/dc/grpcapi"
	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/testkit/rulesettest"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rulefile"
	"github.com/weirhq/weir/pkg/ruleset"
	"github.com/weirhq/weir/pkg/store/memstore"
)

// New returns a limiter over an in-memory store with rules (a YAML rule
// document; "" loads none) and the clock now (nil: time.Now), closed when
// t ends.
func New(t testing.TB, rules string, now func() time.Time) *limiter.Limiter {
	t.Helper()
	st, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := limiter.New(limiter.Config{Store: st, CacheKeys: -1, Now: now, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if rules != "" {
		if err := l.SetRules(rulesettest.Compile(t, rules)); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// Serve serves lim's weir.v1 API, with opts, on a loopback port until t
// ends, and returns the address.
func Serve(t testing.TB, lim *limiter.Limiter, opts ...grpc.ServerOption) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	grpcapi.Register(s, grpcapi.NewService(lim))
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Serve(ln) })
	t.Cleanup(func() { s.Stop(); wg.Wait() })
	return ln.Addr().String()
}

// Limiterd is a limiter process (internal/dc/limiterd) run in-process.
type Limiterd struct {
	// GRPC and HTTP are the addresses it listens on, the same after a
	// restart.
	GRPC, HTTP string

	cfg    limiterd.Config
	cancel context.CancelFunc
	done   chan error
}

// Start runs a limiter with cfg until t ends. rules is written to a file
// the limiter reads; the listen addresses default to loopback ports, the
// logger to none.
func Start(t testing.TB, cfg limiterd.Config, rules string) *Limiterd {
	t.Helper()
	cfg.RulesFile = filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(cfg.RulesFile, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = "127.0.0.1:0"
	}
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = discard()
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = time.Second
	}
	l := &Limiterd{cfg: cfg}
	l.run(t)
	l.cfg.HTTPAddr, l.cfg.GRPCAddr = l.HTTP, l.GRPC
	t.Cleanup(func() { l.Stop(t) })
	return l
}

func (l *Limiterd) run(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	cfg := l.cfg
	cfg.Ready = func(httpAddr, grpcAddr string) {
		l.HTTP, l.GRPC = httpAddr, grpcAddr
		close(ready)
	}
	l.cancel, l.done = cancel, make(chan error, 1)
	go func() { l.done <- limiterd.Run(ctx, cfg) }()
	select {
	case <-ready:
	case err := <-l.done:
		cancel()
		l.cancel = nil
		t.Fatalf("limiter exited before it was ready: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("limiter not ready in 15s")
	}
}

// Stop stops the limiter and waits for it; it does nothing when the
// limiter is stopped already.
func (l *Limiterd) Stop(t testing.TB) {
	t.Helper()
	if l.cancel == nil {
		return
	}
	l.cancel()
	l.cancel = nil
	if err := <-l.done; err != nil {
		t.Errorf("limiter: %v", err)
	}
}

// Restart starts the stopped limiter again on the same addresses.
func (l *Limiterd) Restart(t testing.TB) {
	t.Helper()
	if l.cancel != nil {
		t.Fatal("limitertest: Restart of a running limiter")
	}
	l.run(t)
}

// Checks returns how many Check calls the limiter has decided since it
// (last) started, from its own metrics (weir_check_duration_seconds).
func (l *Limiterd) Checks(t testing.TB) uint64 {
	t.Helper()
	resp, err := http.Get("http://" + l.HTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the limiter's metrics: %v", err)
	}
	f, ok := families["weir_check_duration_seconds"]
	if !ok || len(f.GetMetric()) != 1 {
		t.Fatalf("the limiter's metrics have no weir_check_duration_seconds")
	}
	return f.GetMetric()[0].GetHistogram().GetSampleCount()
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// String describes l for test logs.
func (l *Limiterd) String() string { return fmt.Sprintf("limiter grpc=%s http=%s", l.GRPC, l.HTTP) }

// Run serves, on a loopback port, the weir.v1 API of a limiter over an
// in-memory store with rules and the clock now (nil: time.Now), for
// examples, which have no testing.TB: it returns the address and the
// function that stops it all.
func Run(rules string, now func() time.Time) (addr string, stop func(), err error) {
	set, err := rulefile.Parse([]byte(rules))
	if err != nil {
		return "", nil, err
	}
	compiled, err := ruleset.Compile(set)
	if err != nil {
		return "", nil, err
	}
	st, err := memstore.New(memstore.Config{})
	if err != nil {
		return "", nil, err
	}
	lim, err := limiter.New(limiter.Config{Store: st, CacheKeys: -1, Now: now, Logger: discard()})
	if err != nil {
		return "", nil, err
	}
	if err := lim.SetRules(compiled); err != nil {
		lim.Close()
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		lim.Close()
		return "", nil, err
	}
	s := grpc.NewServer()
	grpcapi.Register(s, grpcapi.NewService(lim))
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Serve(ln) })
	return ln.Addr().String(), func() { s.Stop(); wg.Wait(); lim.Close() }, nil
}
