package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/internal/testkit/limitertest"
	"github.com/weirhq/weir/pkg/client"
	"github.com/weirhq/weir/pkg/grpclimit"
	"github.com/weirhq/weir/pkg/httplimit"
	"github.com/weirhq/weir/pkg/limiter"
)

var _ grpclimit.Checker = (*limiter.Limiter)(nil)

const rulesYAML = `
domain: rpc
rules:
  - rule_id: health-check
    path_pattern: /grpc.health.v1.Health/Check
    key_type: ip
    limit: 2
    window_seconds: 60
    algorithm: FixedWindow
  - rule_id: watch-per-tenant
    path_pattern: /grpc.health.v1.Health/Watch
    key_type: tenant
    limit: 1
    window_seconds: 30
    algorithm: FixedWindow
    rejection_message: One watch per tenant.
`

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func fixed() time.Time { return t0 }

// checkers are the two ways to decide: in-process and over the network.
var checkers = []struct {
	name string
	new  func(t *testing.T, rules string) grpclimit.Checker
}{
	{"in-process", func(t *testing.T, rules string) grpclimit.Checker { return limitertest.New(t, rules, fixed) }},
	{"remote", func(t *testing.T, rules string) grpclimit.Checker {
		addr := limitertest.Serve(t, limitertest.New(t, rules, fixed))
		c, err := client.New(client.Config{Addrs: []string{addr}, Timeout: 5 * time.Second, Policy: client.Policy{OnFailure: client.Fail}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}},
}

// serveHealth serves the health service behind the interceptors of cfg
// and returns a connection to it.
func serveHealth(t *testing.T, cfg grpclimit.Config) *grpc.ClientConn {
	t.Helper()
	in, err := grpclimit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.ChainUnaryInterceptor(in.Unary()), grpc.ChainStreamInterceptor(in.Stream()))
	healthpb.RegisterHealthServer(s, health.NewServer())
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Serve(ln) })
	t.Cleanup(func() { s.Stop(); wg.Wait() })
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func retryDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return -1
}

func TestUnary(t *testing.T) {
	reset := strconv.FormatInt(t0.Add(time.Minute).Unix(), 10)
	for _, ck := range checkers {
		t.Run(ck.name, func(t *testing.T) {
			conn := serveHealth(t, grpclimit.Config{Checker: ck.new(t, rulesYAML), Now: fixed})
			h := healthpb.NewHealthClient(conn)
			for i, want := range []struct {
				code             codes.Code
				remaining, retry string
				delay            time.Duration
			}{
				{codes.OK, "1", "", -1},
				{codes.OK, "0", "", -1},
				{codes.ResourceExhausted, "0", "60", time.Minute},
			} {
				var tr metadata.MD
				_, err := h.Check(ctx(t), &healthpb.HealthCheckRequest{}, grpc.Trailer(&tr))
				if got := status.Code(err); got != want.code {
					t.Fatalf("call %d: got %v (%v), want %v", i, got, err, want.code)
				}
				for k, v := range map[string]string{
					"x-ratelimit-limit": "2", "x-ratelimit-remaining": want.remaining, "x-ratelimit-reset": reset,
					"ratelimit-policy": `"health-check";q=2;w=60`, "retry-after": want.retry,
				} {
					if got := strings.Join(tr.Get(k), ","); got != v {
						t.Errorf("call %d: trailer %s = %q, want %q", i, k, got, v)
					}
				}
				if got := retryDelay(err); got != want.delay {
					t.Errorf("call %d: retry delay %v, want %v", i, got, want.delay)
				}
			}
		})
	}
}

func TestStream(t *testing.T) {
	for _, ck := range checkers {
		t.Run(ck.name, func(t *testing.T) {
			conn := serveHealth(t, grpclimit.Config{Checker: ck.new(t, rulesYAML), Now: fixed, Metadata: map[string]string{"X-Tenant": "tenant"}})
			h := healthpb.NewHealthClient(conn)
			watch := func(tenant string) (*healthpb.HealthCheckResponse, grpc.ServerStreamingClient[healthpb.HealthCheckResponse], error) {
				sctx, cancel := context.WithCancel(ctx(t))
				t.Cleanup(cancel)
				if tenant != "" {
					sctx = metadata.AppendToOutgoingContext(sctx, "x-tenant", tenant)
				}
				st, err := h.Watch(sctx, &healthpb.HealthCheckRequest{})
				if err != nil {
					return nil, nil, err
				}
				resp, err := st.Recv()
				return resp, st, err
			}
			if _, _, err := watch("acme"); err != nil {
				t.Fatalf("first watch of acme: %v", err)
			}
			_, st, err := watch("acme")
			if status.Code(err) != codes.ResourceExhausted || status.Convert(err).Message() != "One watch per tenant." || retryDelay(err) != 30*time.Second {
				t.Fatalf("second watch of acme: got %v (delay %v), want RESOURCE_EXHAUSTED with the rule's message, retry in 30s", err, retryDelay(err))
			}
			if got := st.Trailer().Get("retry-after"); len(got) != 1 || got[0] != "30" {
				t.Errorf("second watch of acme: trailer retry-after %q, want 30", got)
			}
			if _, _, err := watch("globex"); err != nil {
				t.Errorf("first watch of globex: %v", err)
			}
			// Without the metadata the rule does not apply.
			for range 3 {
				if _, _, err := watch(""); err != nil {
					t.Errorf("watch without a tenant: %v", err)
				}
			}
		})
	}
}

// failing is a checker out of reach.
type failing struct{}

func (failing) Check(context.Context, limiter.Request) (limiter.Response, error) {
	return limiter.Response{}, errors.New("connection refused")
}

func TestOnErrorAndSkip(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name string
		cfg  grpclimit.Config
		want codes.Code
	}{
		{"allow", grpclimit.Config{Checker: failing{}, Logger: quiet}, codes.OK},
		{"reject", grpclimit.Config{Checker: failing{}, OnError: httplimit.Reject, Logger: quiet}, codes.Unavailable},
		{"skipped", grpclimit.Config{Checker: failing{}, OnError: httplimit.Reject, Logger: quiet, Skip: func(m string) bool { return strings.HasPrefix(m, "/grpc.health.v1.") }}, codes.OK},
		{"metadata too long", grpclimit.Config{Checker: failing{}, Metadata: map[string]string{"x-big": "big"}, Logger: quiet}, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := healthpb.NewHealthClient(serveHealth(t, tc.cfg))
			c := metadata.AppendToOutgoingContext(ctx(t), "x-big", strings.Repeat("b", limiter.MaxValueLen+1))
			if _, err := h.Check(c, &healthpb.HealthCheckRequest{}); status.Code(err) != tc.want {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  grpclimit.Config
		want string
	}{
		{"no checker", grpclimit.Config{}, "Checker is required"},
		{"unknown policy", grpclimit.Config{Checker: failing{}, OnError: 5}, "unknown OnError"},
		{"reserved attribute", grpclimit.Config{Checker: failing{}, Metadata: map[string]string{"x-ip": "ip"}}, `set "ip"`},
		{"empty attribute", grpclimit.Config{Checker: failing{}, Metadata: map[string]string{"x-a": ""}}, "non-empty"},
	} {
		if _, err := grpclimit.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
