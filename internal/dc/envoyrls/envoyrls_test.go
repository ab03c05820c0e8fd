package envoyrls_test

import (
	"bytes"
	"context"
	"maps"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weirhq/weir/internal/dc/envoyrls"
	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/internal/testkit/grpctest"
	"github.com/weirhq/weir/internal/testkit/rulesettest"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/ruleset"
	"github.com/weirhq/weir/pkg/store/memstore"
)

// messaging is an envoyproxy/ratelimit configuration, loaded as Weir rules
// by pkg/rulefile.
const messaging = `
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 5}
  - key: generic_key
    value: burst
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: tenant
    rate_limit: {unlimited: true}
  - key: watched
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`

// other is a second domain, so that requests must name theirs.
const other = `
domain: other
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1}
`

// t0 is the fake clock's start: noon, half a day before a day window resets.
var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// newService returns the service over a limiter on a memory store and a
// fake clock at t0 (cfg.Now), with the rule files given.
func newService(t testing.TB, cfg envoyrls.Config, files ...string) *envoyrls.Service {
	t.Helper()
	store, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := fakeclock.New(t0)
	lim, err := limiter.New(limiter.Config{Store: store, Now: c.Now, CacheKeys: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	var sets []*ruleset.Set
	for _, f := range files {
		sets = append(sets, rulesettest.Compile(t, f))
	}
	if err := lim.SetRules(sets...); err != nil {
		t.Fatal(err)
	}
	cfg.Now = c.Now
	return envoyrls.NewService(lim, cfg)
}

// serve starts a real gRPC server on loopback with the service registered,
// as newService makes it, and returns a connection to it.
func serve(t testing.TB, files ...string) *grpc.ClientConn {
	t.Helper()
	svc := newService(t, envoyrls.Config{}, files...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	envoyrls.Register(srv, svc)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func serveClient(t testing.TB, files ...string) rlsv3.RateLimitServiceClient {
	t.Helper()
	return rlsv3.NewRateLimitServiceClient(serve(t, files...))
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// desc returns a descriptor of the given key, value pairs.
func desc(kv ...string) *rlcommonv3.RateLimitDescriptor {
	d := &rlcommonv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlcommonv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func withHits(d *rlcommonv3.RateLimitDescriptor, hits uint64) *rlcommonv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(hits)
	return d
}

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

// marketing is the status of the marketing descriptor with remaining left.
func marketing(code rlsv3.RateLimitResponse_Code, remaining uint32) *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{
		Code: code,
		CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{Name: "message_type_marketing.to_number", RequestsPerUnit: 5,
			Unit: rlsv3.RateLimitResponse_RateLimit_DAY},
		LimitRemaining:     remaining,
		DurationUntilReset: durationpb.New(12 * time.Hour),
	}
}

func burst(code rlsv3.RateLimitResponse_Code, remaining uint32) *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{
		Code: code,
		CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{Name: "generic_key_burst", RequestsPerUnit: 2,
			Unit: rlsv3.RateLimitResponse_RateLimit_SECOND},
		LimitRemaining:     remaining,
		DurationUntilReset: durationpb.New(time.Second),
	}
}

var unlimited = &rlsv3.RateLimitResponse_DescriptorStatus{Code: ok}

// call is one ShouldRateLimit and the response it should get.
type call struct {
	req  *rlsv3.RateLimitRequest
	want *rlsv3.RateLimitResponse
}

func response(statuses ...*rlsv3.RateLimitResponse_DescriptorStatus) *rlsv3.RateLimitResponse {
	r := &rlsv3.RateLimitResponse{OverallCode: ok, Statuses: statuses}
	for _, s := range statuses {
		if s.Code == over {
			r.OverallCode = over
		}
	}
	return r
}

func request(hits uint32, ds ...*rlcommonv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "messaging", Descriptors: ds, HitsAddend: hits}
}

func TestShouldRateLimit(t *testing.T) {
	mkt := func() *rlcommonv3.RateLimitDescriptor {
		return desc("message_type", "marketing", "to_number", "+15550100")
	}
	gen := func() *rlcommonv3.RateLimitDescriptor { return desc("generic_key", "burst") }
	tests := []struct {
		name  string
		calls []call
	}{
		{"marketing: 5 a day for each number", []call{
			{request(0, mkt()), response(marketing(ok, 4))},
			{request(0, mkt()), response(marketing(ok, 3))},
			{request(0, mkt()), response(marketing(ok, 2))},
			{request(0, mkt()), response(marketing(ok, 1))},
			{request(0, mkt()), response(marketing(ok, 0))},
			{request(0, mkt()), response(marketing(over, 0))},
			// another number has its own counter
			{request(0, desc("message_type", "marketing", "to_number", "+15550199")), response(marketing(ok, 4))},
		}},
		{"generic key: 2 a second", []call{
			{request(0, gen()), response(burst(ok, 1))},
			{request(0, gen()), response(burst(ok, 0))},
			{request(0, gen()), response(burst(over, 0))},
		}},
		{"request hits_addend", []call{
			{request(3, mkt()), response(marketing(ok, 2))},
			{request(3, mkt()), response(marketing(over, 2))}, // rejected: nothing taken
			{request(2, mkt()), response(marketing(ok, 0))},
		}},
		{"descriptor hits_addend overrides the request's", []call{
			{request(1, withHits(mkt(), 4)), response(marketing(ok, 1))},
			{request(5, withHits(mkt(), 0)), response(marketing(ok, 0))}, // 0 means 1
		}},
		{"unmatched, unlimited and shadow descriptors are OK", []call{
			{request(0, desc("message_type", "transactional", "to_number", "+1")), response(unlimited)},
			{request(0, desc("unknown", "x")), response(unlimited)},
			{request(0, desc()), response(unlimited)},
			{request(0, desc("tenant", "acme")), response(unlimited)},
			{request(0, desc("watched", "w")), response(&rlsv3.RateLimitResponse_DescriptorStatus{Code: ok,
				CurrentLimit:   &rlsv3.RateLimitResponse_RateLimit{Name: "watched", RequestsPerUnit: 1, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
				LimitRemaining: 0, DurationUntilReset: durationpb.New(time.Minute)})},
			{request(0, desc("watched", "w")), response(&rlsv3.RateLimitResponse_DescriptorStatus{Code: ok, // over, but shadow
				CurrentLimit:   &rlsv3.RateLimitResponse_RateLimit{Name: "watched", RequestsPerUnit: 1, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
				LimitRemaining: 0, DurationUntilReset: durationpb.New(time.Minute)})},
		}},
		{"several descriptors, one over: overall OVER_LIMIT, statuses in order", []call{
			{request(0, gen(), gen()), response(burst(ok, 1), burst(ok, 0))},
			{request(0, desc("unknown", "x"), mkt(), gen()), response(unlimited, marketing(ok, 4), burst(over, 0))},
		}},
		{"an unknown domain limits nothing, as in envoyproxy/ratelimit", []call{
			{&rlsv3.RateLimitRequest{Domain: "nope", Descriptors: []*rlcommonv3.RateLimitDescriptor{gen()}}, response(&rlsv3.RateLimitResponse_DescriptorStatus{Code: ok})},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := serveClient(t, messaging)
			for i, c := range tt.calls {
				got, err := client.ShouldRateLimit(ctx(t), c.req)
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if !proto.Equal(got, c.want) {
					t.Errorf("call %d:\ngot  %s\nwant %s", i, prototext.Format(got), prototext.Format(c.want))
				}
			}
		})
	}
}

func TestShouldRateLimitInvalid(t *testing.T) {
	many := make([]*rlcommonv3.RateLimitDescriptor, limiter.MaxItems+1)
	for i := range many {
		many[i] = desc("user", "u")
	}
	manyEntries := &rlcommonv3.RateLimitDescriptor{}
	for i := range limiter.MaxAttributes + 1 {
		manyEntries.Entries = append(manyEntries.Entries, &rlcommonv3.RateLimitDescriptor_Entry{Key: "k" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), Value: "v"})
	}
	tests := []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want string // in the message
	}{
		{"too many descriptors", &rlsv3.RateLimitRequest{Domain: "other", Descriptors: many}, "descriptors: more than 256, at most 256"},
		{"too many entries", &rlsv3.RateLimitRequest{Domain: "other", Descriptors: []*rlcommonv3.RateLimitDescriptor{manyEntries}}, "descriptors[0].entries: more than 64, at most 64"},
		{"empty key", &rlsv3.RateLimitRequest{Domain: "other", Descriptors: []*rlcommonv3.RateLimitDescriptor{desc("user", "u", "", "v")}}, "descriptors[0].entries[1].key: 0 bytes"},
		{"oversized key", &rlsv3.RateLimitRequest{Domain: "other", Descriptors: []*rlcommonv3.RateLimitDescriptor{desc("user", "u"), desc(strings.Repeat("k", 129), "v")}}, "descriptors[1].entries[0].key: 129 bytes, want 1 to 128"},
		{"oversized value", &rlsv3.RateLimitRequest{Domain: "other", Descriptors: []*rlcommonv3.RateLimitDescriptor{desc("user", strings.Repeat("v", 1025))}}, "descriptors[0].entries[0].value: 1025 bytes, at most 1024"},
		{"repeated key", &rlsv3.RateLimitRequest{Domain: "other", Descriptors: []*rlcommonv3.RateLimitDescriptor{desc("user", "a", "user", "b")}}, `descriptors[0].entries[1].key: "user" repeated`},
		{"descriptor hits one too many", &rlsv3.RateLimitRequest{Domain: "other", Descriptors: []*rlcommonv3.RateLimitDescriptor{withHits(desc("user", "u"), limiter.MaxHits+1)}}, "descriptors[0]: hits_addend: 4294967296, at most 4294967295"},
		{"descriptor hits too many", &rlsv3.RateLimitRequest{Domain: "other", Descriptors: []*rlcommonv3.RateLimitDescriptor{withHits(desc("user", "u"), 1<<63)}}, "descriptors[0]: hits_addend: 9223372036854775808"},
		{"negative hits", &rlsv3.RateLimitRequest{Domain: "other", Descriptors: []*rlcommonv3.RateLimitDescriptor{{IsNegativeHits: true, Entries: desc("user", "u").Entries}}}, "is_negative_hits: not supported"},
	}
	client := serveClient(t, messaging, other)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.ShouldRateLimit(ctx(t), tt.req)
			if got := status.Code(err); got != codes.InvalidArgument {
				t.Fatalf("got %v (%v), want InvalidArgument", got, err)
			}
			if msg := status.Convert(err).Message(); !strings.Contains(msg, tt.want) {
				t.Errorf("got message %q, want it to contain %q", msg, tt.want)
			}
		})
	}
	// The service still answers.
	got, err := client.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "other", Descriptors: []*rlcommonv3.RateLimitDescriptor{desc("user", "u")}})
	if err != nil || got.GetOverallCode() != ok {
		t.Errorf("after bad requests: got %v, %v, want OK", got, err)
	}
}

// TestMalformed sends bytes that are not a RateLimitRequest.
func TestMalformed(t *testing.T) {
	conn := serve(t, messaging)
	const method = "/" + envoyrls.ServiceName + "/ShouldRateLimit"
	for _, tt := range []struct {
		name string
		data []byte
	}{
		{"truncated length", []byte{0x12, 0xff}},
		{"invalid UTF-8 in the domain", []byte{0x0a, 0x02, 0xff, 0xfe}},
		{"field number 0", []byte{0x00, 0x01}},
		{"truncated varint", []byte{0x18, 0xff, 0xff}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out []byte
			err := conn.Invoke(ctx(t), method, tt.data, &out, grpc.ForceCodecV2(grpctest.RawCodec{}))
			if got := status.Code(err); got != codes.InvalidArgument {
				t.Fatalf("got %v (%v), want InvalidArgument", got, err)
			}
			if msg := status.Convert(err).Message(); !strings.HasPrefix(msg, "malformed request: ") {
				t.Errorf("message: got %q, want it to start with %q", msg, "malformed request: ")
			}
		})
	}
	// The raw codec does reach the service: a valid message in bytes works.
	data, err := proto.Marshal(request(0, desc("generic_key", "burst")))
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := conn.Invoke(ctx(t), method, data, &out, grpc.ForceCodecV2(grpctest.RawCodec{})); err != nil {
		t.Fatalf("valid bytes through the raw codec: %v", err)
	}
	var resp rlsv3.RateLimitResponse
	if err := proto.Unmarshal(out, &resp); err != nil || resp.OverallCode != ok {
		t.Fatalf("valid bytes through the raw codec: got %v, %v, want OK", &resp, err)
	}
}

func TestUnit(t *testing.T) {
	tests := []struct {
		window int64
		want   rlsv3.RateLimitResponse_RateLimit_Unit
	}{
		{0, rlsv3.RateLimitResponse_RateLimit_UNKNOWN},
		{1, rlsv3.RateLimitResponse_RateLimit_SECOND},
		{7, rlsv3.RateLimitResponse_RateLimit_SECOND},
		{8, rlsv3.RateLimitResponse_RateLimit_MINUTE},
		{60, rlsv3.RateLimitResponse_RateLimit_MINUTE},
		{300, rlsv3.RateLimitResponse_RateLimit_MINUTE},
		{3600, rlsv3.RateLimitResponse_RateLimit_HOUR},
		{86400, rlsv3.RateLimitResponse_RateLimit_DAY},
		{604800, rlsv3.RateLimitResponse_RateLimit_WEEK},
		{2592000, rlsv3.RateLimitResponse_RateLimit_MONTH},
		{31536000, rlsv3.RateLimitResponse_RateLimit_YEAR},
		{10 * 31536000, rlsv3.RateLimitResponse_RateLimit_YEAR},
	}
	for _, tt := range tests {
		if got := envoyrls.Unit(tt.window); got != tt.want {
			t.Errorf("Unit(%d): got %v, want %v", tt.window, got, tt.want)
		}
	}
}

// nested has a limit on a descriptor and another on its child, as
// envoyproxy/ratelimit configurations often do.
const nested = `
domain: nested
descriptors:
  - key: generic_key
    value: default
    rate_limit: {unit: second, requests_per_unit: 1}
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 3}
`

// A descriptor takes only the limit at its exact path of keys, as in
// envoyproxy/ratelimit: [generic_key=default, user=u] is limited by the
// child's 3/s, not also by the parent's 1/s; [generic_key=default] by the
// parent's alone.
func TestExactPathOnly(t *testing.T) {
	cli := serveClient(t, nested)
	for i, want := range []rlsv3.RateLimitResponse_Code{ok, ok, ok, over} {
		resp, err := cli.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "nested",
			Descriptors: []*rlcommonv3.RateLimitDescriptor{desc("generic_key", "default", "user", "u")}})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetOverallCode(); got != want {
			t.Fatalf("call %d with the child's path: %v, want %v", i+1, got, want)
		}
		if l := resp.GetStatuses()[0].GetCurrentLimit(); l.GetRequestsPerUnit() != 3 {
			t.Fatalf("call %d: current limit %v, want the child's 3/s", i+1, l)
		}
	}
	for i, want := range []rlsv3.RateLimitResponse_Code{ok, over} {
		resp, err := cli.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "nested",
			Descriptors: []*rlcommonv3.RateLimitDescriptor{desc("generic_key", "default")}})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetOverallCode(); got != want {
			t.Fatalf("call %d with the parent's path: %v, want %v", i+1, got, want)
		}
	}
}

// trial holds, in Weir's format, a shadow rule being trialled beside an
// enforcing one on the same descriptor, tighter than it.
const trial = `
domain: trial
rules:
  - rule_id: strict
    key_type: user
    limit: 1
    window_seconds: 60
    algorithm: FixedWindow
    shadow: true
  - rule_id: current
    key_type: user
    limit: 3
    window_seconds: 60
    algorithm: FixedWindow
`

// TestShadowBesideEnforcing checks that a shadow rule at its limit never
// shapes a descriptor's status when an enforcing rule applies: the status
// reports the enforcing rule, and the code is OK until it rejects.
func TestShadowBesideEnforcing(t *testing.T) {
	client := serveClient(t, trial)
	status := func(code rlsv3.RateLimitResponse_Code, remaining uint32) *rlsv3.RateLimitResponse {
		return response(&rlsv3.RateLimitResponse_DescriptorStatus{
			Code:               code,
			CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{Name: "current", RequestsPerUnit: 3, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
			LimitRemaining:     remaining,
			DurationUntilReset: durationpb.New(time.Minute),
		})
	}
	req := &rlsv3.RateLimitRequest{Domain: "trial", Descriptors: []*rlcommonv3.RateLimitDescriptor{desc("user", "u1")}}
	for i, want := range []*rlsv3.RateLimitResponse{status(ok, 2), status(ok, 1), status(ok, 0), status(over, 0)} {
		got, err := client.ShouldRateLimit(ctx(t), req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("call %d:\ngot  %s\nwant %s", i, prototext.Format(got), prototext.Format(want))
		}
	}
}

// TestRefusesOversizedEarly: a request of more descriptors, or of more
// entries in a descriptor, than the limiter takes is refused with
// InvalidArgument as soon as the count passes the bound, at the cost of a
// request the limiter takes, on every path: the fast path of Weir's rules
// and of a peer's configuration, and proto.Unmarshal's (a field the fast
// path does not know, first). 4 MiB of empty descriptors once grew the
// limiter by 170 MB before it refused them. Allocations and bytes are
// deterministic, unlike time.
func TestRefusesOversizedEarly(t *testing.T) {
	svc, _ := peerService(t, envoyrls.Headers{}, pool)
	const size = 4 << 20
	field := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1)
	emptyDescs := bytes.Repeat([]byte{0x12, 0x00}, size/2)
	emptyEntries := field(2, bytes.Repeat([]byte{0x0a, 0x00}, size/2))
	const tooManyDescs = "descriptors: more than 256, at most 256"
	const tooManyEntries = "descriptors[0].entries: more than 64, at most 64"
	for _, tc := range []struct {
		name string
		req  []byte
		want string
	}{
		{"empty descriptors, Weir's rules", slices.Concat(field(1, []byte("weir")), emptyDescs), tooManyDescs},
		{"empty descriptors, a peer's configuration", slices.Concat(field(1, []byte("pool")), emptyDescs), tooManyDescs},
		{"empty descriptors, proto.Unmarshal", slices.Concat(unknown, field(1, []byte("pool")), emptyDescs), tooManyDescs},
		{"empty descriptors, the domain last", slices.Concat(emptyDescs, field(1, []byte("pool"))), tooManyDescs},
		{"empty entries, Weir's rules", slices.Concat(field(1, []byte("weir")), emptyEntries), tooManyEntries},
		{"empty entries, a peer's configuration", slices.Concat(field(1, []byte("pool")), emptyEntries), tooManyEntries},
		{"empty entries, proto.Unmarshal", slices.Concat(unknown, field(1, []byte("pool")), emptyEntries), tooManyEntries},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.ShouldRateLimitWire(ctx(t), tc.req)
			if code, msg := status.Code(err), status.Convert(err).Message(); code != codes.InvalidArgument || msg != tc.want {
				t.Fatalf("got %v %q, want InvalidArgument %q", code, msg, tc.want)
			}
			if allocs := testing.AllocsPerRun(3, func() { _, _ = svc.ShouldRateLimitWire(context.Background(), tc.req) }); allocs > 64 {
				t.Errorf("allocations: got %v, want at most 64 (the race detector adds a few; what this tells apart is millions)", allocs)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, _ = svc.ShouldRateLimitWire(context.Background(), tc.req)
			runtime.ReadMemStats(&after)
			if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
				t.Errorf("bytes allocated: got %d, want at most %d", got, 64<<10)
			}
		})
	}
}

// blocked is a Weir rule file whose override denies one user outright: a
// rejection with no limit to report.
const blocked = `
domain: blocked
rules:
  - rule_id: per-user
    key_type: user
    limit: 5
    window_seconds: 60
    algorithm: FixedWindow
    overrides:
      - {key: mallory, action: deny}
`

// TestHeadersBesideDeny checks the rate limit headers on a domain of Weir
// rules where a deny override rejects a descriptor: that status has no
// limit, so the headers describe another descriptor's, or are left out;
// they used to dereference its missing limit and panic.
func TestHeadersBesideDeny(t *testing.T) {
	svc := newService(t, envoyrls.Config{Headers: envoyrls.PeerHeaders}, blocked)
	tests := []struct {
		name  string
		descs []*rlcommonv3.RateLimitDescriptor
		want  map[string]string
	}{
		{"denied alone: no headers", []*rlcommonv3.RateLimitDescriptor{desc("user", "mallory")}, map[string]string{}},
		{"denied beside a limited descriptor: the limited one's", []*rlcommonv3.RateLimitDescriptor{desc("user", "alice"), desc("user", "mallory")},
			map[string]string{"RateLimit-Limit": "5", "RateLimit-Remaining": "4", "RateLimit-Reset": "60"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := svc.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "blocked", Descriptors: tt.descs})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetOverallCode() != over {
				t.Errorf("overall code: got %v, want %v", resp.GetOverallCode(), over)
			}
			got := map[string]string{}
			for _, h := range resp.GetResponseHeadersToAdd() {
				got[h.GetKey()] = h.GetValue()
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("headers: got %v, want %v", got, tt.want)
			}
		})
	}
}
