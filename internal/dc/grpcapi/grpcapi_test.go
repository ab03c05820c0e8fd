package grpcapi_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/weirhq/weir/internal/dc/grpcapi"
	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/internal/testkit/grpctest"
	"github.com/weirhq/weir/internal/testkit/rulesettest"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/store/memstore"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

const rulesYAML = `
domain: shop
rules:
  - rule_id: login
    path_pattern: /auth/login
    methods: [POST]
    key_type: username
    limit: 2
    window_seconds: 300
    algorithm: SlidingWindowLog
    rejection_message: Too many login attempts.
    retry_advice: exponential_backoff
  - rule_id: per-ip
    path_pattern: /auth/**
    key_type: ip
    limit: 10
    window_seconds: 60
    algorithm: FixedWindow
  - rule_id: tenant-user
    key_type: [tenant, user_id]
    limit: 3
    window_seconds: 60
    algorithm: TokenBucket
  - rule_id: health
    path_pattern: /health
    unlimited: true
  - rule_id: trial
    conditions: {plan: trial}
    key_type: user_id
    limit: 1
    window_seconds: 60
    algorithm: FixedWindow
    shadow: true
  - rule_id: accounts
    key_type: account
    limit: 5
    window_seconds: 60
    algorithm: FixedWindow
    overrides:
      - {key: evil, action: deny}
      - {key: friend, action: allow}
  - rule_id: archive
    key_type: archive
    limit: 5
    window_seconds: 60
    enabled: false
`

// t0 is the fake clock's start, on a minute boundary.
var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

var compile = rulesettest.Compile

// serve starts a real gRPC server on loopback, with opts, the service,
// health and reflection registered, over a limiter on a memory store and
// a fake clock, and returns a connection to it.
func serve(t testing.TB, rules string, opts ...grpc.ServerOption) *grpc.ClientConn {
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
	if rules != "" {
		if err := lim.SetRules(compile(t, rules)); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	grpcapi.Register(srv, grpcapi.NewService(lim))
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

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func item(hits int64, kv ...string) *weirv1.CheckItem {
	it := &weirv1.CheckItem{Attributes: map[string]string{}, Hits: hits}
	for i := 0; i+1 < len(kv); i += 2 {
		it.Attributes[kv[i]] = kv[i+1]
	}
	return it
}

func wantProto(t testing.TB, what string, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("%s:\ngot  %s\nwant %s", what, prototext.Format(got), prototext.Format(want))
	}
}

func TestCheck(t *testing.T) {
	client := weirv1.NewLimiterClient(serve(t, rulesYAML))
	loginReset := timestamppb.New(t0.Add(300 * time.Second))
	minute := timestamppb.New(t0.Add(time.Minute))
	none := durationpb.New(0)
	login := func(allowed bool, remaining int64) *weirv1.RuleResult {
		r := &weirv1.RuleResult{RuleId: "login", Key: "john", Allowed: allowed, Limit: 2, Remaining: remaining, ResetAt: loginReset,
			RetryAfter: none, WindowSeconds: 300, Source: weirv1.Source_SOURCE_STORE, RetryAdvice: weirv1.RetryAdvice_RETRY_ADVICE_EXPONENTIAL_BACKOFF}
		if !allowed {
			r.RetryAfter = durationpb.New(300 * time.Second)
			r.Message = "Too many login attempts."
		}
		return r
	}
	perIP := func(remaining int64) *weirv1.RuleResult {
		return &weirv1.RuleResult{RuleId: "per-ip", Key: "192.0.2.1", Allowed: true, Limit: 10, Remaining: remaining, ResetAt: minute,
			RetryAfter: none, WindowSeconds: 60, Source: weirv1.Source_SOURCE_STORE, RetryAdvice: weirv1.RetryAdvice_RETRY_ADVICE_RETRY_AFTER}
	}
	refunded := func(r *weirv1.RuleResult) *weirv1.RuleResult { r.Refunded = true; return r }
	loginItem := item(1, "ip", "192.0.2.1", "username", "john", "path", "/auth/login", "method", "POST")
	req := &weirv1.CheckRequest{Domain: "shop", Items: []*weirv1.CheckItem{
		loginItem, loginItem, loginItem,
		item(0, "nothing", "here"),
		item(1, "path", "/health"),
		item(1, "account", "evil"),
		item(1, "account", "friend"),
		item(1, "plan", "trial", "user_id", "u1"),
		item(1, "plan", "trial", "user_id", "u1"),
		item(2, "tenant", "acme", "user_id", "a|b"),
	}}
	want := &weirv1.CheckResponse{Allowed: false, Items: []*weirv1.ItemResult{
		// Items are decided in order, each seeing the ones before.
		{Allowed: true, Decisive: 0, Results: []*weirv1.RuleResult{login(true, 1), perIP(9)}},
		{Allowed: true, Decisive: 0, Results: []*weirv1.RuleResult{login(true, 0), perIP(8)}},
		// Rejected by login: per-ip gets its unit back.
		{Allowed: false, Decisive: 0, Results: []*weirv1.RuleResult{login(false, 0), refunded(perIP(8))}},
		{Allowed: true, Decisive: -1, Results: []*weirv1.RuleResult{}},
		// No limit: no_limit, and no limit, remaining, times or advice.
		{Allowed: true, Decisive: 0, Results: []*weirv1.RuleResult{{RuleId: "health", Allowed: true, Source: weirv1.Source_SOURCE_UNLIMITED, NoLimit: true}}},
		// A deny is for good: no retry_after.
		{Allowed: false, Decisive: 0, Results: []*weirv1.RuleResult{{RuleId: "accounts", Key: "evil", WindowSeconds: 60, Source: weirv1.Source_SOURCE_OVERRIDE_DENY, NoLimit: true}}},
		{Allowed: true, Decisive: 0, Results: []*weirv1.RuleResult{{RuleId: "accounts", Key: "friend", Allowed: true, WindowSeconds: 60, Source: weirv1.Source_SOURCE_OVERRIDE_ALLOW, NoLimit: true}}},
		// Shadow rules are never decisive.
		{Allowed: true, Decisive: -1, Results: []*weirv1.RuleResult{{RuleId: "trial", Key: "u1", Allowed: true, Limit: 1, ResetAt: minute, RetryAfter: none,
			WindowSeconds: 60, Shadow: true, Source: weirv1.Source_SOURCE_STORE, RetryAdvice: weirv1.RetryAdvice_RETRY_ADVICE_RETRY_AFTER}}},
		// The shadow rule rejects; the item is still allowed.
		{Allowed: true, Decisive: -1, Results: []*weirv1.RuleResult{{RuleId: "trial", Key: "u1", Limit: 1, ResetAt: minute, RetryAfter: durationpb.New(time.Minute),
			WindowSeconds: 60, Shadow: true, Source: weirv1.Source_SOURCE_STORE, RetryAdvice: weirv1.RetryAdvice_RETRY_ADVICE_RETRY_AFTER}}},
		// Two of three tokens at three a minute: full again in 40s.
		{Allowed: true, Decisive: 0, Results: []*weirv1.RuleResult{{RuleId: "tenant-user", Key: `acme|a\|b`, Allowed: true, Limit: 3, Remaining: 1,
			ResetAt: timestamppb.New(t0.Add(40 * time.Second)), RetryAfter: none, WindowSeconds: 60, Source: weirv1.Source_SOURCE_STORE,
			RetryAdvice: weirv1.RetryAdvice_RETRY_ADVICE_RETRY_AFTER}}},
	}}
	got, err := client.Check(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != len(want.Items) {
		t.Fatalf("got %d items, want %d", len(got.Items), len(want.Items))
	}
	if got.Allowed != want.Allowed {
		t.Errorf("allowed: got %v, want %v", got.Allowed, want.Allowed)
	}
	for i := range want.Items {
		wantProto(t, fmt.Sprintf("item %d", i), got.Items[i], want.Items[i])
	}

	// A request whose every item passes is allowed as a whole.
	got, err = client.Check(ctx(t), &weirv1.CheckRequest{Items: []*weirv1.CheckItem{item(1, "account", "a"), item(1, "account", "b")}})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Allowed {
		t.Errorf("two allowed items: got allowed=false, want true")
	}
}

// With all_or_nothing, a request of which an item is rejected spends
// nothing: the other items stay allowed, their admissions given back and
// marked refunded. Without it, they spend. Both ways Check is served:
// decoded straight from the wire, and through the generated messages (as
// with an interceptor).
func TestCheckAllOrNothing(t *testing.T) {
	passThrough := grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(ctx, req)
	})
	for _, way := range []struct {
		name string
		opts []grpc.ServerOption
	}{{"wire", nil}, {"generated", []grpc.ServerOption{passThrough}}} {
		t.Run(way.name, func(t *testing.T) {
			client := weirv1.NewLimiterClient(serve(t, rulesYAML, way.opts...))
			check := func(all bool, items ...*weirv1.CheckItem) *weirv1.CheckResponse {
				t.Helper()
				resp, err := client.Check(ctx(t), &weirv1.CheckRequest{Items: items, AllOrNothing: all})
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			remaining := func(user string) int64 {
				t.Helper()
				resp, err := client.Status(ctx(t), &weirv1.StatusRequest{RuleId: "tenant-user", Key: "acme|" + user})
				if err != nil {
					t.Fatal(err)
				}
				return resp.GetResult().GetRemaining()
			}
			// tenant-user is a bucket of 3 tokens: "full" spends them all.
			user := func(name string, hits int64) *weirv1.CheckItem { return item(hits, "tenant", "acme", "user_id", name) }
			if !check(false, user("full", 3)).GetAllowed() {
				t.Fatal("the first 3 hits of full were rejected")
			}

			// A request all of whose items pass spends as without the flag.
			if resp := check(true, user("ann", 1), user("bob", 1)); !resp.GetAllowed() || resp.GetItems()[0].GetResults()[0].GetRefunded() {
				t.Fatalf("two items under their limits: %v", resp)
			}
			if r := remaining("ann"); r != 2 {
				t.Fatalf("ann after an allowed all-or-nothing request: remaining %d, want 2", r)
			}

			// cat and dan pass, full does not: nothing is spent.
			resp := check(true, user("cat", 1), user("full", 1), user("dan", 2))
			if resp.GetAllowed() {
				t.Fatal("a request with a rejected item was allowed")
			}
			for i, want := range []struct {
				allowed, refunded bool
				remaining         int64
			}{{true, true, 3}, {false, false, 0}, {true, true, 3}} {
				it := resp.GetItems()[i]
				r := it.GetResults()[0]
				if it.GetAllowed() != want.allowed || r.GetAllowed() != want.allowed || r.GetRefunded() != want.refunded || r.GetRemaining() != want.remaining {
					t.Errorf("item %d: allowed %v, refunded %v, remaining %d; want %v, %v, %d", i, it.GetAllowed(), r.GetRefunded(), r.GetRemaining(),
						want.allowed, want.refunded, want.remaining)
				}
			}
			if c, d := remaining("cat"), remaining("dan"); c != 3 || d != 3 {
				t.Fatalf("after a rejected all-or-nothing request: cat %d, dan %d remaining, want 3 and 3", c, d)
			}

			// The same request without the flag: cat and dan spend.
			resp = check(false, user("cat", 1), user("full", 1), user("dan", 2))
			if resp.GetAllowed() || resp.GetItems()[0].GetResults()[0].GetRefunded() {
				t.Fatalf("without all_or_nothing: %v", resp)
			}
			if c, d := remaining("cat"), remaining("dan"); c != 2 || d != 1 {
				t.Fatalf("without all_or_nothing: cat %d, dan %d remaining, want 2 and 1", c, d)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	client := weirv1.NewLimiterClient(serve(t, rulesYAML))
	if _, err := client.Check(ctx(t), &weirv1.CheckRequest{Items: []*weirv1.CheckItem{
		item(1, "username", "john", "path", "/auth/login", "method", "POST"),
		item(1, "tenant", "acme", "user_id", "a|b"),
	}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  *weirv1.StatusRequest
		want *weirv1.RuleResult
	}{
		{"spent once", &weirv1.StatusRequest{RuleId: "login", Key: "john"}, &weirv1.RuleResult{RuleId: "login", Key: "john", Allowed: true, Limit: 2, Remaining: 1,
			ResetAt: timestamppb.New(t0.Add(300 * time.Second)), RetryAfter: durationpb.New(0), WindowSeconds: 300, Source: weirv1.Source_SOURCE_STORE,
			RetryAdvice: weirv1.RetryAdvice_RETRY_ADVICE_EXPONENTIAL_BACKOFF}},
		{"composite key", &weirv1.StatusRequest{Domain: "shop", RuleId: "tenant-user", Key: `acme|a\|b`}, &weirv1.RuleResult{RuleId: "tenant-user", Key: `acme|a\|b`,
			Allowed: true, Limit: 3, Remaining: 2, ResetAt: timestamppb.New(t0.Add(20 * time.Second)), RetryAfter: durationpb.New(0), WindowSeconds: 60,
			Source: weirv1.Source_SOURCE_STORE, RetryAdvice: weirv1.RetryAdvice_RETRY_ADVICE_RETRY_AFTER}},
		{"deny override", &weirv1.StatusRequest{RuleId: "accounts", Key: "evil"}, &weirv1.RuleResult{RuleId: "accounts", Key: "evil",
			WindowSeconds: 60, Source: weirv1.Source_SOURCE_OVERRIDE_DENY, NoLimit: true}},
		{"allow override", &weirv1.StatusRequest{RuleId: "accounts", Key: "friend"}, &weirv1.RuleResult{RuleId: "accounts", Key: "friend",
			Allowed: true, WindowSeconds: 60, Source: weirv1.Source_SOURCE_OVERRIDE_ALLOW, NoLimit: true}},
		{"disabled rule", &weirv1.StatusRequest{RuleId: "archive", Key: "a1"}, &weirv1.RuleResult{RuleId: "archive", Key: "a1",
			Allowed: true, WindowSeconds: 60, Source: weirv1.Source_SOURCE_DISABLED, NoLimit: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := client.Status(ctx(t), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			wantProto(t, "result", got.GetResult(), tt.want)
		})
	}
}

func TestErrors(t *testing.T) {
	conn := serve(t, rulesYAML)
	client := weirv1.NewLimiterClient(conn)
	many := make(map[string]string)
	for i := range limiter.MaxAttributes + 1 {
		many[strings.Repeat("a", i+1)] = "v"
	}
	items := func(n int) []*weirv1.CheckItem {
		out := make([]*weirv1.CheckItem, n)
		for i := range out {
			out[i] = item(1, "account", "a")
		}
		return out
	}
	checks := []struct {
		name string
		req  *weirv1.CheckRequest
		code codes.Code
	}{
		{"no items", &weirv1.CheckRequest{}, codes.InvalidArgument},
		{"too many items", &weirv1.CheckRequest{Items: items(limiter.MaxItems + 1)}, codes.InvalidArgument},
		{"too many attributes", &weirv1.CheckRequest{Items: []*weirv1.CheckItem{{Attributes: many}}}, codes.InvalidArgument},
		{"huge value", &weirv1.CheckRequest{Items: []*weirv1.CheckItem{item(1, "account", strings.Repeat("x", limiter.MaxValueLen+1))}}, codes.InvalidArgument},
		{"huge name", &weirv1.CheckRequest{Items: []*weirv1.CheckItem{item(1, strings.Repeat("n", limiter.MaxNameLen+1), "v")}}, codes.InvalidArgument},
		{"empty name", &weirv1.CheckRequest{Items: []*weirv1.CheckItem{item(1, "", "v")}}, codes.InvalidArgument},
		{"negative hits", &weirv1.CheckRequest{Items: []*weirv1.CheckItem{item(-1, "account", "a")}}, codes.InvalidArgument},
		{"huge hits", &weirv1.CheckRequest{Items: []*weirv1.CheckItem{item(limiter.MaxHits+1, "account", "a")}}, codes.InvalidArgument},
		{"unknown domain", &weirv1.CheckRequest{Domain: "nope", Items: items(1)}, codes.InvalidArgument},
		{"second item bad", &weirv1.CheckRequest{Items: []*weirv1.CheckItem{item(1, "account", "a"), item(-5, "account", "a")}}, codes.InvalidArgument},
	}
	for _, tt := range checks {
		t.Run("check "+tt.name, func(t *testing.T) {
			_, err := client.Check(ctx(t), tt.req)
			if got := status.Code(err); got != tt.code {
				t.Fatalf("got %v (%v), want %v", got, err, tt.code)
			}
			if msg := status.Convert(err).Message(); msg == "" {
				t.Errorf("got an empty message, want the reason")
			}
		})
	}
	statuses := []struct {
		name string
		req  *weirv1.StatusRequest
		code codes.Code
	}{
		{"unknown rule", &weirv1.StatusRequest{RuleId: "nope", Key: "k"}, codes.NotFound},
		{"no rule", &weirv1.StatusRequest{Key: "k"}, codes.InvalidArgument},
		{"unknown domain", &weirv1.StatusRequest{Domain: "nope", RuleId: "login", Key: "k"}, codes.InvalidArgument},
		{"composite key with one value", &weirv1.StatusRequest{RuleId: "tenant-user", Key: "acme"}, codes.InvalidArgument},
		{"empty key", &weirv1.StatusRequest{RuleId: "login"}, codes.InvalidArgument},
		{"key too long", &weirv1.StatusRequest{RuleId: "login", Key: strings.Repeat("k", 5000)}, codes.InvalidArgument},
	}
	for _, tt := range statuses {
		t.Run("status "+tt.name, func(t *testing.T) {
			_, err := client.Status(ctx(t), tt.req)
			if got := status.Code(err); got != tt.code {
				t.Fatalf("got %v (%v), want %v", got, err, tt.code)
			}
		})
	}

	// Bytes that are not a valid message, sent as they are.
	malformed := []struct {
		name      string
		data      []byte
		checkOnly bool // well-formed as a StatusRequest
	}{
		{"truncated length", []byte{0x12, 0xff}, false},
		{"invalid UTF-8 in a string", []byte{0x0a, 0x02, 0xff, 0xfe}, false},
		{"field number 0", []byte{0x00, 0x01}, false},
		{"truncated varint", []byte{0x10, 0xff, 0xff}, false},
		{"end group without start", []byte{0x0c}, false},
		{"item with a truncated map entry", []byte{0x12, 0x04, 0x0a, 0x02, 0x0a, 0x05}, true},
		{"attribute value not UTF-8", []byte{0x12, 0x08, 0x0a, 0x06, 0x0a, 0x01, 'k', 0x12, 0x01, 0xff}, true},
		// Each byte the HTTP API once turned into U+FFFD, so that they
		// shared a counter: proto3 refuses them in names and values.
		{"attribute value \\xfe", []byte{0x12, 0x08, 0x0a, 0x06, 0x0a, 0x01, 'k', 0x12, 0x01, 0xfe}, true},
		{"attribute value \\x80", []byte{0x12, 0x08, 0x0a, 0x06, 0x0a, 0x01, 'k', 0x12, 0x01, 0x80}, true},
		{"attribute value \\xc0", []byte{0x12, 0x08, 0x0a, 0x06, 0x0a, 0x01, 'k', 0x12, 0x01, 0xc0}, true},
		{"attribute name not UTF-8", []byte{0x12, 0x08, 0x0a, 0x06, 0x0a, 0x01, 0xff, 0x12, 0x01, 'v'}, true},
	}
	for _, method := range []string{"/weir.v1.Limiter/Check", "/weir.v1.Limiter/Status"} {
		for _, tt := range malformed {
			if tt.checkOnly && method != "/weir.v1.Limiter/Check" {
				continue
			}
			t.Run(method+" "+tt.name, func(t *testing.T) {
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
	}
	// The raw codec does reach the service: a valid message in bytes works.
	data, err := proto.Marshal(&weirv1.CheckRequest{Items: items(1)})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := conn.Invoke(ctx(t), "/weir.v1.Limiter/Check", data, &out, grpc.ForceCodecV2(grpctest.RawCodec{})); err != nil {
		t.Fatalf("valid bytes through the raw codec: %v", err)
	}
	var resp weirv1.CheckResponse
	if err := proto.Unmarshal(out, &resp); err != nil || !resp.Allowed {
		t.Fatalf("valid bytes through the raw codec: got %v, %v, want allowed", &resp, err)
	}
}

func TestNoRules(t *testing.T) {
	client := weirv1.NewLimiterClient(serve(t, ""))
	_, err := client.Check(ctx(t), &weirv1.CheckRequest{Items: []*weirv1.CheckItem{item(1, "a", "b")}})
	if got := status.Code(err); got != codes.Unavailable {
		t.Errorf("check without rules: got %v, want Unavailable", got)
	}
}

// TestErrorReasons checks the ErrorInfo that lets clients tell the
// limiter's errors apart without reading messages.
func TestErrorReasons(t *testing.T) {
	withRules := weirv1.NewLimiterClient(serve(t, rulesYAML))
	without := weirv1.NewLimiterClient(serve(t, ""))
	many := &weirv1.CheckItem{Attributes: map[string]string{}}
	for i := range limiter.MaxAttributes + 1 {
		many.Attributes[strconv.Itoa(i)] = "v"
	}
	manyItems := &weirv1.CheckRequest{}
	for range 100_000 {
		manyItems.Items = append(manyItems.Items, &weirv1.CheckItem{})
	}
	for _, tt := range []struct {
		name    string
		client  weirv1.LimiterClient
		req     *weirv1.CheckRequest
		want    string
		message string // "": not compared
	}{
		{"invalid", withRules, &weirv1.CheckRequest{Items: []*weirv1.CheckItem{item(-1, "account", "a")}}, grpcapi.ReasonInvalid, ""},
		{"unknown domain", withRules, &weirv1.CheckRequest{Domain: "nope", Items: []*weirv1.CheckItem{item(1, "account", "a")}}, grpcapi.ReasonUnknownDomain, ""},
		{"no rules", without, &weirv1.CheckRequest{Items: []*weirv1.CheckItem{item(1, "account", "a")}}, grpcapi.ReasonNoRules, ""},
		// Refused while decoding, before the rest is built.
		{"too many items", withRules, manyItems, grpcapi.ReasonInvalid, "limiter: invalid request: more than 256 items, want 1 to 256"},
		{"too many attributes", withRules, &weirv1.CheckRequest{Items: []*weirv1.CheckItem{item(1, "account", "a"), many}}, grpcapi.ReasonInvalid, "item 1: limiter: invalid request: more than 64 attributes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.client.Check(ctx(t), tt.req)
			if code := status.Code(err); code != codes.InvalidArgument && code != codes.Unavailable {
				t.Fatalf("got %v (%v), want InvalidArgument or Unavailable", code, err)
			}
			var got string
			for _, d := range status.Convert(err).Details() {
				if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == grpcapi.ErrorDomain {
					got = info.GetReason()
				}
			}
			if got != tt.want {
				t.Errorf("got reason %q (%v), want %q", got, err, tt.want)
			}
			if msg := status.Convert(err).Message(); tt.message != "" && msg != tt.message {
				t.Errorf("message: got %q, want %q", msg, tt.message)
			}
		})
	}
}

func TestHealthAndReflection(t *testing.T) {
	conn := serve(t, rulesYAML)
	health := healthpb.NewHealthClient(conn)
	for _, svc := range []string{"", "weir.v1.Limiter"} {
		resp, err := health.Check(ctx(t), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatalf("health of %q: %v", svc, err)
		}
		if resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: got %v, want SERVING", svc, resp.Status)
		}
	}

	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"weir.v1.Limiter", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection: got services %v, want %s among them", names, want)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Errorf("after CloseSend: got %v, want EOF", err)
	}
}
