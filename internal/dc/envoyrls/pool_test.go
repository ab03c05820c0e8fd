package envoyrls_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/weirhq/weir/internal/dc/envoyrls"
	"github.com/weirhq/weir/internal/testkit/grpctest"
)

// pool is a configuration whose limit depends on each descriptor's
// entries: an entry left over from another call would change a
// descriptor's limit, and a key left over its remaining count.
const pool = `
domain: pool
descriptors:
  - key: kind
    value: user
    descriptors:
      - key: user_id
        rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: kind
    value: vip
    descriptors:
      - key: user_id
        rate_limit: {unit: hour, requests_per_unit: 5000}
  - key: kind
    value: free
    rate_limit: {unlimited: true}
`

// Concurrent calls through the server's pooled decoders each get the
// answer of their own descriptors, on the peer path (a configuration of
// envoyproxy/ratelimit) and on Weir's rules: the limit their own entries
// select, for a key of their own (first use: all but one remaining),
// whatever the calls before them on the same decoder held.
func TestPooledDecodersKeepCallsApart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(t *testing.T) rlsv3.RateLimitServiceClient
		// unlimited is limit_remaining for an unlimited limit: the
		// peer's, or, for Weir's rules, a rule's that limits nothing.
		unlimited uint32
	}{
		{"peer", func(t *testing.T) rlsv3.RateLimitServiceClient {
			c, _ := peerServe(t, envoyrls.Headers{}, pool)
			return c
		}, math.MaxUint32},
		{"weir rules", func(t *testing.T) rlsv3.RateLimitServiceClient { return serveClient(t, pool) }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, c := tc.client(t), ctx(t)
			grpctest.Callers(t, 8, 100, func(g, n int) error { return poolCall(c, client, g, n, tc.unlimited) })
		})
	}
}

// poolCall makes caller g's call n: 1 to 18 descriptors (past the 16
// whose buffers are kept), each a user, a VIP, unlimited or of no limit,
// and checks its answer (unlimited: an unlimited limit's remaining).
func poolCall(c context.Context, client rlsv3.RateLimitServiceClient, g, n int, unlimited uint32) error {
	count := 1 + (g+n)%18
	req := &rlsv3.RateLimitRequest{Domain: "pool"}
	type want struct {
		perUnit   uint32
		unit      rlsv3.RateLimitResponse_RateLimit_Unit
		unlimited bool
	}
	wants := make([]want, count)
	for i := range count {
		user := fmt.Sprintf("u%d-%d-%d", g, n, i)
		d := &rlcommonv3.RateLimitDescriptor{}
		switch (g*7 + n*3 + i) % 4 {
		case 0:
			d.Entries = []*rlcommonv3.RateLimitDescriptor_Entry{{Key: "kind", Value: "user"}, {Key: "user_id", Value: user}}
			wants[i] = want{perUnit: 1000, unit: rlsv3.RateLimitResponse_RateLimit_MINUTE}
		case 1:
			d.Entries = []*rlcommonv3.RateLimitDescriptor_Entry{{Key: "kind", Value: "vip"}, {Key: "user_id", Value: user}}
			wants[i] = want{perUnit: 5000, unit: rlsv3.RateLimitResponse_RateLimit_HOUR}
		case 2:
			d.Entries = []*rlcommonv3.RateLimitDescriptor_Entry{{Key: "kind", Value: "free"}}
			wants[i] = want{unlimited: true}
		default:
			d.Entries = []*rlcommonv3.RateLimitDescriptor_Entry{{Key: "kind", Value: "other"}, {Key: "user_id", Value: user}, {Key: "x", Value: "y"}}
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	resp, err := client.ShouldRateLimit(c, req)
	if err != nil {
		return err
	}
	if len(resp.GetStatuses()) != count || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		return fmt.Errorf("%d statuses, overall %v; want %d, OK", len(resp.GetStatuses()), resp.GetOverallCode(), count)
	}
	for i, s := range resp.GetStatuses() {
		w, l := wants[i], s.GetCurrentLimit()
		switch {
		case w.perUnit == 0 && l != nil:
			return fmt.Errorf("descriptor %d: limit %v, want none", i, l)
		case w.unlimited && s.GetLimitRemaining() != unlimited:
			return fmt.Errorf("descriptor %d: %d remaining, want %d (unlimited)", i, s.GetLimitRemaining(), unlimited)
		case w.perUnit == 0 && !w.unlimited && s.GetLimitRemaining() != 0:
			return fmt.Errorf("descriptor %d: %d remaining, want 0 (no limit)", i, s.GetLimitRemaining())
		case w.perUnit == 0:
		case l.GetRequestsPerUnit() != w.perUnit || l.GetUnit() != w.unit || s.GetLimitRemaining() != w.perUnit-1:
			return fmt.Errorf("descriptor %d: limit %d per %v with %d remaining, want %d per %v with %d", i, l.GetRequestsPerUnit(), l.GetUnit(), s.GetLimitRemaining(), w.perUnit, w.unit, w.perUnit-1)
		}
	}
	return nil
}
