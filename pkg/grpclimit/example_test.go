package grpclimit_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/internal/testkit/limitertest"
	"github.com/weirhq/weir/pkg/client"
	"github.com/weirhq/weir/pkg/grpclimit"
)

// A gRPC service behind the interceptors, deciding through a remote
// limiter: here the service is the standard health service, limited to
// two Checks a minute per tenant.
func Example() {
	// limiterAddr is the DC's limiter, e.g. "limiter.weir.svc:9090".
	limiterAddr, stop, err := limitertest.Run(`
domain: rpc
rules:
  - rule_id: health-per-tenant
    path_pattern: /grpc.health.v1.Health/Check
    key_type: tenant
    limit: 2
    window_seconds: 60
    algorithm: FixedWindow
`, func() time.Time { return t0 })
	if err != nil {
		log.Fatal(err)
	}
	defer stop()

	c, err := client.New(client.Config{Addrs: []string{limiterAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	in, err := grpclimit.New(grpclimit.Config{Checker: c, Metadata: map[string]string{"x-tenant": "tenant"}})
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(in.Unary()), grpc.ChainStreamInterceptor(in.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	// A caller of the service.
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "acme")
	for range 3 {
		var trailer metadata.MD
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
		if err != nil {
			// The delay is in the status details (google.rpc.RetryInfo).
			fmt.Println(status.Code(err), "retry in", retryDelay(err))
			continue
		}
		fmt.Println("OK, remaining", trailer.Get("x-ratelimit-remaining"))
	}
	// Output:
	// OK, remaining [1]
	// OK, remaining [0]
	// ResourceExhausted retry in 1m0s
}
