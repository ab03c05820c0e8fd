package envoyrls_test

import (
	"context"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/dc/envoyrls"
	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/internal/testkit/rulesettest"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/store/memstore"
)

// FuzzShouldRateLimit feeds random requests, as protobuf bytes, to the
// service: every one gets a response with a status per descriptor, or
// InvalidArgument.
func FuzzShouldRateLimit(f *testing.F) {
	for _, req := range []*rlsv3.RateLimitRequest{
		request(0, desc("message_type", "marketing", "to_number", "+1")),
		request(7, desc("generic_key", "burst"), withHits(desc("watched", "w"), 3)),
		{Domain: "other", Descriptors: nil},
		{Domain: "nope"},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	store, err := memstore.New(memstore.Config{})
	if err != nil {
		f.Fatal(err)
	}
	c := fakeclock.New(t0)
	lim, err := limiter.New(limiter.Config{Store: store, Now: c.Now})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(lim.Close)
	if err := lim.SetRules(rulesettest.Compile(f, messaging), rulesettest.Compile(f, other)); err != nil {
		f.Fatal(err)
	}
	svc := envoyrls.NewService(lim, envoyrls.Config{Now: c.Now})
	f.Fuzz(func(t *testing.T, data []byte) {
		var req rlsv3.RateLimitRequest
		if proto.Unmarshal(data, &req) != nil {
			return // the server answers these InvalidArgument (TestMalformed)
		}
		resp, err := svc.ShouldRateLimit(context.Background(), &req)
		if err != nil {
			// Unknown: envoyproxy/ratelimit's answer to an empty domain
			// or descriptor list.
			if code := status.Code(err); code != codes.InvalidArgument && code != codes.Unknown {
				t.Fatalf("got %v (%v), want a response or InvalidArgument", code, err)
			}
			return
		}
		if got, want := len(resp.GetStatuses()), len(req.GetDescriptors()); got != want {
			t.Fatalf("got %d statuses, want %d", got, want)
		}
		overall := rlsv3.RateLimitResponse_OK
		for _, st := range resp.GetStatuses() {
			if st.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
				overall = st.GetCode()
			}
		}
		if resp.GetOverallCode() != overall {
			t.Fatalf("got overall %v, want %v", resp.GetOverallCode(), overall)
		}
	})
}
