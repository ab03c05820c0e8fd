package envoyrls_test

import (
	"math"
	"net"
	"strings"
	"testing"
	"time"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/internal/dc/envoyrls"
	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/pkg/envoyconf"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rulefile"
	"github.com/weirhq/weir/pkg/ruleset"
	"github.com/weirhq/weir/pkg/store/memstore"
	"github.com/weirhq/weir/pkg/store/redisstore"
)

// The configurations of envoyproxy/ratelimit's integration tests (basic,
// another) and one exercising the rest of its format.
const (
	peerBasic = `
domain: basic
descriptors:
  - key: key1
    rate_limit: {unit: second, requests_per_unit: 50}
  - key: one_per_minute
    rate_limit: {unit: minute, requests_per_unit: 1}
`
	peerAnother = `
domain: another
descriptors:
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: key3
    rate_limit: {unit: hour, requests_per_unit: 10}
`
	peerMixed = `
domain: mixed
descriptors:
  - key: path
    value: /api/*
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: file
    value: a*z
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: code
    value: 500
    rate_limit: {unit: minute, requests_per_unit: 1, name: errors}
  - key: zero
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: free
    rate_limit: {unlimited: true}
  - key: watched
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
    descriptors:
      - key: user
        value: admin
        rate_limit: {unit: minute, requests_per_unit: 1}
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 10, name: tenant}
  - key: vip
    rate_limit: {unit: hour, requests_per_unit: 100, replaces: [{name: tenant}]}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: default
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: default
    value: special
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: big
    rate_limit: {unit: minute, requests_per_unit: 5000000}
  - key: huge
    rate_limit: {unit: hour, requests_per_unit: 4294967295}
`
)

// t1 is 12:00:10 UTC: 50 s before a minute window resets, 3590 s before an
// hour's.
var t1 = time.Date(2026, 11, 22, 12, 0, 10, 0, time.UTC)

// peerStores are the stores the replays run on: a real Redis, and the
// memory store of a limiter started without one. docs/envoy.md promises
// the same answers on either.
var peerStores = []struct {
	name string
	open func(t *testing.T) limiter.Store
}{
	{"redis", redisStore},
	{"memory", func(t *testing.T) limiter.Store {
		store, err := memstore.New(memstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return store
	}},
}

// redisStore returns a store on a real Redis started for t.
func redisStore(t *testing.T) limiter.Store {
	t.Helper()
	srv := redistest.Start(t)
	store, err := redisstore.New(srv.Client(t), redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// peerService returns the Envoy API over a limiter on a real Redis with
// the given configurations of envoyproxy/ratelimit.
func peerService(t *testing.T, headers envoyrls.Headers, docs ...string) (*envoyrls.Service, *fakeclock.Clock) {
	t.Helper()
	return peerServiceOn(t, redisStore(t), headers, docs...)
}

// peerServiceOn is peerService over the given store.
func peerServiceOn(t *testing.T, store limiter.Store, headers envoyrls.Headers, docs ...string) (*envoyrls.Service, *fakeclock.Clock) {
	t.Helper()
	return peerServiceWith(t, store, envoyrls.Config{Headers: headers}, docs...)
}

// peerServiceWith is peerServiceOn with the service's settings; cfg.Now
// and cfg.Configs are set to the fake clock and the configurations.
func peerServiceWith(t *testing.T, store limiter.Store, cfg envoyrls.Config, docs ...string) (*envoyrls.Service, *fakeclock.Clock) {
	t.Helper()
	c := fakeclock.New(t1)
	lim, err := limiter.New(limiter.Config{Store: store, Now: c.Now, StoreTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	trees := map[string]*envoyconf.Domain{}
	var sets []*ruleset.Set
	for _, d := range docs {
		e, err := rulefile.ParseEnvoyConfig([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		set, err := ruleset.Compile(e.Rules)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, set)
		trees[e.Tree.Name] = e.Tree
	}
	if err := lim.SetRules(sets...); err != nil {
		t.Fatal(err)
	}
	cfg.Now, cfg.Configs = c.Now, func(d string) *envoyconf.Domain { return trees[d] }
	return envoyrls.NewService(lim, cfg), c
}

// peerServe serves the Envoy API over gRPC, as peerService makes it.
func peerServe(t *testing.T, headers envoyrls.Headers, docs ...string) (rlsv3.RateLimitServiceClient, *fakeclock.Clock) {
	t.Helper()
	return peerServeOn(t, redisStore(t), headers, docs...)
}

// peerServeOn is peerServe over the given store.
func peerServeOn(t *testing.T, store limiter.Store, headers envoyrls.Headers, docs ...string) (rlsv3.RateLimitServiceClient, *fakeclock.Clock) {
	t.Helper()
	svc, c := peerServiceOn(t, store, headers, docs...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	envoyrls.Register(gs, svc)
	done := make(chan error, 1)
	go func() { done <- gs.Serve(ln) }()
	t.Cleanup(func() {
		gs.Stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn), c
}

// st is an expected descriptor status: code, remaining, and the limit
// (perUnit 0 and no unit for none), reset in seconds.
type st struct {
	over      bool
	remaining uint32
	perUnit   uint32
	unit      rlsv3.RateLimitResponse_RateLimit_Unit
	name      string
	reset     int64
}

const (
	sec  = rlsv3.RateLimitResponse_RateLimit_SECOND
	mins = rlsv3.RateLimitResponse_RateLimit_MINUTE
	hour = rlsv3.RateLimitResponse_RateLimit_HOUR
)

var noLimit = st{}

func check(t *testing.T, step string, got *rlsv3.RateLimitResponse, overall bool, want ...st) {
	t.Helper()
	if o := got.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT; o != overall {
		t.Errorf("%s: got overall over-limit %v, want %v", step, o, overall)
	}
	if len(got.GetStatuses()) != len(want) {
		t.Fatalf("%s: got %d statuses, want %d", step, len(got.GetStatuses()), len(want))
	}
	for i, w := range want {
		g := got.GetStatuses()[i]
		if o := g.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT; o != w.over {
			t.Errorf("%s: status %d: got over-limit %v, want %v", step, i, o, w.over)
		}
		if g.GetLimitRemaining() != w.remaining {
			t.Errorf("%s: status %d: got remaining %d, want %d", step, i, g.GetLimitRemaining(), w.remaining)
		}
		cl := g.GetCurrentLimit()
		if (cl == nil) != (w.unit == 0) {
			t.Fatalf("%s: status %d: got limit %v, want one: %v", step, i, cl, w.unit != 0)
		}
		if cl == nil {
			if g.GetDurationUntilReset() != nil {
				t.Errorf("%s: status %d: got a reset %v without a limit, want none", step, i, g.GetDurationUntilReset())
			}
			continue
		}
		if cl.GetRequestsPerUnit() != w.perUnit || cl.GetUnit() != w.unit || cl.GetName() != w.name {
			t.Errorf("%s: status %d: got limit %d/%v %q, want %d/%v %q", step, i, cl.GetRequestsPerUnit(), cl.GetUnit(), cl.GetName(), w.perUnit, w.unit, w.name)
		}
		if r := g.GetDurationUntilReset(); r.GetSeconds() != w.reset || r.GetNanos() != 0 {
			t.Errorf("%s: status %d: got reset %v, want %ds", step, i, r.AsDuration(), w.reset)
		}
	}
}

func TestPeerReplayIntegration(t *testing.T) {
	c, clock := peerServe(t, envoyrls.Headers{}, peerBasic, peerAnother)
	call := func(domain string, hits uint32, ds ...*rlcommonv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
		t.Helper()
		resp, err := c.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds, HitsAddend: hits})
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return resp
	}
	// An unknown domain limits nothing.
	check(t, "unknown domain", call("foo", 1, desc("hello", "world")), false, noLimit)
	check(t, "key1", call("basic", 1, desc("key1", "foo")), false, st{remaining: 49, perUnit: 50, unit: sec, reset: 1})
	// 25 requests against 20 a minute: the 21st on are over.
	for i := range 25 {
		w := st{remaining: uint32(max(0, 20-(i+1))), perUnit: 20, unit: mins, reset: 50, over: i >= 20}
		check(t, "key2 #"+itoa(i), call("another", 1, desc("key2", "r1")), i >= 20, w)
	}
	// Two descriptors, one of each domain's hour limit: each counted.
	for i := range 12 {
		w := st{remaining: uint32(max(0, 10-(i+1))), perUnit: 10, unit: hour, reset: 3590, over: i >= 10}
		check(t, "key3 #"+itoa(i), call("another", 1, desc("key3", "r2"), desc("key2", "r3")), i >= 10,
			w, st{remaining: uint32(19 - i), perUnit: 20, unit: mins, reset: 50})
	}
	// hits_addend: 50 a second, 10 at a time.
	for i := range 6 {
		w := st{remaining: uint32(max(0, 50-10*(i+1))), perUnit: 50, unit: sec, reset: 1, over: i >= 5}
		check(t, "key1 x10 #"+itoa(i), call("basic", 10, desc("key1", "bar")), i >= 5, w)
	}
	// The window is the epoch's minute: it resets at 12:01:00.
	check(t, "one_per_minute", call("basic", 1, desc("one_per_minute", "x")), false, st{perUnit: 1, unit: mins, reset: 50})
	check(t, "one_per_minute again", call("basic", 1, desc("one_per_minute", "x")), true, st{over: true, perUnit: 1, unit: mins, reset: 50})
	clock.Advance(50 * time.Second)
	check(t, "one_per_minute next window", call("basic", 1, desc("one_per_minute", "x")), false, st{perUnit: 1, unit: mins, reset: 60})
}

func TestPeerReplayBehaviours(t *testing.T) {
	type req struct {
		hits uint32
		ds   []*rlcommonv3.RateLimitDescriptor
	}
	withLimit := func(d *rlcommonv3.RateLimitDescriptor, n uint32, u rlsv3.RateLimitResponse_RateLimit_Unit) *rlcommonv3.RateLimitDescriptor {
		d.Limit = &rlcommonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: typev3.RateLimitUnit(u)}
		return d
	}
	type step struct {
		r       req
		overall bool
		want    []st
	}
	m := func(over bool, rem, per uint32, name string) st {
		return st{over: over, remaining: rem, perUnit: per, unit: mins, name: name, reset: 50}
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"prefix wildcard", []step{
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("path", "/api/a")}}, false, []st{m(false, 1, 2, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("path", "/api/b")}}, false, []st{m(false, 1, 2, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("path", "/web")}}, false, []st{noLimit}},
		}},
		{"middle wildcard shared", []step{
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("file", "abz")}}, false, []st{m(false, 1, 2, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("file", "a-long-z")}}, false, []st{m(false, 0, 2, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("file", "az")}}, true, []st{m(true, 0, 2, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("file", "ab")}}, false, []st{noLimit}},
		}},
		{"a number as a value, the limit's name", []step{
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("code", "500")}}, false, []st{m(false, 0, 1, "errors")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("code", "500")}}, true, []st{m(true, 0, 1, "errors")}},
		}},
		{"requests_per_unit 0", []step{
			{req{1, []*rlcommonv3.RateLimitDescriptor{withHits(desc("zero", "a"), 0)}}, false, []st{m(false, 0, 0, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("zero", "a")}}, true, []st{m(true, 0, 0, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{withHits(desc("zero", "a"), 0)}}, true, []st{m(true, 0, 0, "")}},
		}},
		{"unlimited", []step{
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("free", "x")}}, false, []st{{remaining: math.MaxUint32}}},
		}},
		{"shadow mode", []step{
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("watched", "x")}}, false, []st{m(false, 0, 1, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("watched", "x")}}, false, []st{m(false, 0, 1, "")}},
		}},
		{"same key nested, specific beats default", []step{
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("user", "a", "user", "admin")}}, false, []st{m(false, 0, 1, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("user", "a")}}, false, []st{m(false, 2, 3, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("user", "a", "user", "bob")}}, false, []st{noLimit}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("default", "special")}}, false, []st{m(false, 0, 1, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("default", "other")}}, false, []st{m(false, 4, 5, "")}},
			// An empty value is the default's; entry order matters.
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("default", "")}}, false, []st{m(false, 4, 5, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("user", "admin", "user", "a")}}, false, []st{noLimit}},
		}},
		{"replaces", []step{
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("tenant", "t"), desc("vip", "v")}}, false,
				[]st{noLimit, {remaining: 99, perUnit: 100, unit: hour, reset: 3590}}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("tenant", "t")}}, false,
				[]st{{remaining: 9, perUnit: 10, unit: hour, name: "tenant", reset: 3590}}},
		}},
		{"hits beyond the limit are counted", []step{
			{req{0, []*rlcommonv3.RateLimitDescriptor{withHits(desc("default", "h"), 3)}}, false, []st{m(false, 2, 5, "")}},
			{req{0, []*rlcommonv3.RateLimitDescriptor{withHits(desc("default", "h"), 8)}}, true, []st{m(true, 0, 5, "")}},
			{req{0, []*rlcommonv3.RateLimitDescriptor{withHits(desc("default", "h"), 0)}}, true, []st{m(true, 0, 5, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("default", "h")}}, true, []st{m(true, 0, 5, "")}},
		}},
		{"hits in the millions are counted whole", []step{
			{req{0, []*rlcommonv3.RateLimitDescriptor{withHits(desc("big", "b"), 2_000_000)}}, false, []st{m(false, 3_000_000, 5_000_000, "")}},
			{req{0, []*rlcommonv3.RateLimitDescriptor{withHits(desc("big", "b"), 6_000_000)}}, true, []st{m(true, 0, 5_000_000, "")}},
			{req{4_000_000_000, []*rlcommonv3.RateLimitDescriptor{desc("huge", "h")}}, false,
				[]st{{remaining: 294_967_295, perUnit: math.MaxUint32, unit: hour, reset: 3590}}},
		}},
		{"a first hit beyond the limit is counted", []step{
			{req{0, []*rlcommonv3.RateLimitDescriptor{withHits(desc("default", "f"), 8)}}, true, []st{m(true, 0, 5, "")}},
			{req{0, []*rlcommonv3.RateLimitDescriptor{withHits(desc("default", "f"), 0)}}, true, []st{m(true, 0, 5, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("default", "f")}}, true, []st{m(true, 0, 5, "")}},
		}},
		{"hits_addend 0 checks without counting", []step{
			{req{0, []*rlcommonv3.RateLimitDescriptor{withHits(desc("default", "z"), 0)}}, false, []st{m(false, 5, 5, "")}},
			{req{0, []*rlcommonv3.RateLimitDescriptor{withHits(desc("default", "z"), 0)}}, false, []st{m(false, 5, 5, "")}},
		}},
		{"quota mode: over only when every quota descriptor is", []step{
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("quota", "q1"), desc("default", "q")}}, false, []st{m(false, 0, 1, ""), m(false, 4, 5, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("quota", "q1"), desc("quota", "q2")}}, false, []st{m(true, 0, 1, ""), m(false, 0, 1, "")}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{desc("quota", "q1"), desc("default", "q")}}, true, []st{m(true, 0, 1, ""), m(false, 3, 5, "")}},
		}},
		{"the descriptor's own limit", []step{
			{req{1, []*rlcommonv3.RateLimitDescriptor{withLimit(desc("nothing", "x"), 2, sec)}}, false, []st{{remaining: 1, perUnit: 2, unit: sec, reset: 1}}},
			{req{1, []*rlcommonv3.RateLimitDescriptor{withLimit(desc("code", "500"), 2, mins)}}, false, []st{m(false, 1, 2, "")}},
		}},
	}
	for _, ps := range peerStores {
		t.Run(ps.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					c, _ := peerServeOn(t, ps.open(t), envoyrls.Headers{}, peerMixed)
					for i, s := range tt.steps {
						resp, err := c.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "mixed", Descriptors: s.r.ds, HitsAddend: s.r.hits})
						if err != nil {
							t.Fatalf("step %d: %v", i, err)
						}
						check(t, "step "+itoa(i), resp, s.overall, s.want...)
					}
				})
			}
		})
	}
}

func TestPeerErrorsAndHeaders(t *testing.T) {
	c, _ := peerServe(t, envoyrls.PeerHeaders, peerMixed)
	for _, tt := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{"empty domain", &rlsv3.RateLimitRequest{Descriptors: []*rlcommonv3.RateLimitDescriptor{desc("a", "b")}}, "rate limit domain must not be empty"},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "mixed"}, "rate limit descriptor list must not be empty"},
	} {
		_, err := c.ShouldRateLimit(ctx(t), tt.req)
		if s, _ := status.FromError(err); s.Code() != codes.Unknown || s.Message() != tt.want {
			t.Errorf("%s: got %v, want Unknown %q", tt.name, err, tt.want)
		}
	}
	// A descriptor's own limit is not for the server's fast reading of the
	// request: it is decoded whole, and its unit checked.
	own := desc("default", "a")
	own.Limit = &rlcommonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: 42}
	_, err := c.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "mixed", Descriptors: []*rlcommonv3.RateLimitDescriptor{own}})
	if s, _ := status.FromError(err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), "descriptors[0].limit.unit") {
		t.Errorf("a limit of unit 42: got %v, want InvalidArgument naming descriptors[0].limit.unit", err)
	}
	// A cost beyond any limit Envoy's request can state is refused, not
	// counted as less.
	_, err = c.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "mixed", Descriptors: []*rlcommonv3.RateLimitDescriptor{withHits(desc("big", "b"), math.MaxUint32+1)}})
	if s, _ := status.FromError(err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), "descriptors[0].hits_addend: 4294967296, at most 4294967295") {
		t.Errorf("hits_addend 2^32: got %v, want InvalidArgument naming descriptors[0].hits_addend", err)
	}
	resp, err := c.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "mixed", Descriptors: []*rlcommonv3.RateLimitDescriptor{desc("default", "a"), desc("user", "u")}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, h := range resp.GetResponseHeadersToAdd() {
		got[h.GetKey()] = h.GetValue()
	}
	want := map[string]string{"RateLimit-Limit": "3", "RateLimit-Remaining": "2", "RateLimit-Reset": "50"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s: got %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

func itoa(i int) string { return string(rune('0'+i/10)) + string(rune('0'+i%10)) }

// peerHeads has limits of distinct units, so that the reset header tells
// which descriptor the rate limit headers describe.
const peerHeads = `
domain: heads
descriptors:
  - key: q
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: q2
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: r
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: r2
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: s
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: big
    rate_limit: {unit: day, requests_per_unit: 10}
`

// TestPeerHeaderDescriptor pins which descriptor's limit the rate limit
// headers describe, as envoyproxy/ratelimit picks it: the last one over
// its limit that is not in quota_mode, else the first with the least
// remaining; one in quota_mode or shadow_mode over its limit only
// competes on its remaining, 0. At t1 a minute resets in 50 s, an hour in
// 3590 s, a day in 43190 s.
func TestPeerHeaderDescriptor(t *testing.T) {
	c, _ := peerServe(t, envoyrls.PeerHeaders, peerHeads)
	// hit is a descriptor of key with its own hits_addend; its value is
	// the case's, so that no two cases share a counter.
	type hit struct {
		key  string
		hits uint64
	}
	tests := []struct {
		name                    string
		descs                   []hit
		limit, remaining, reset string
	}{
		{"two in quota_mode over: the first at 0, not the last over", []hit{{"q", 2}, {"q2", 2}}, "1", "0", "50"},
		{"over in quota_mode after one over not in it: the one not in it", []hit{{"r2", 2}, {"q", 2}}, "1", "0", "3590"},
		{"over in quota_mode before one over not in it: the one not in it", []hit{{"q", 2}, {"r2", 2}}, "1", "0", "3590"},
		{"over in quota_mode after one under at 0: the first at 0", []hit{{"r", 1}, {"q2", 2}}, "1", "0", "50"},
		{"over in quota_mode beside one under: the least remaining", []hit{{"big", 3}, {"q2", 2}}, "1", "0", "3590"},
		{"under in quota_mode beside one over not in it: the over one", []hit{{"q2", 0}, {"r", 2}}, "1", "0", "50"},
		{"two over, neither in quota_mode: the last", []hit{{"r", 2}, {"r2", 2}}, "1", "0", "3590"},
		{"all under, a tie: the first with the least remaining", []hit{{"big", 9}, {"r2", 0}}, "10", "1", "43190"},
		{"all under: the least remaining", []hit{{"big", 8}, {"r2", 0}}, "1", "1", "3590"},
		{"over in shadow_mode: the least remaining, not preferred", []hit{{"big", 3}, {"s", 2}}, "1", "0", "3590"},
		{"over in shadow_mode before one over: the over one", []hit{{"s", 2}, {"big", 11}}, "10", "0", "43190"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ds []*rlcommonv3.RateLimitDescriptor
			for _, h := range tt.descs {
				ds = append(ds, withHits(desc(h.key, "case"+itoa(i)), h.hits))
			}
			resp, err := c.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "heads", Descriptors: ds})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, h := range resp.GetResponseHeadersToAdd() {
				got[h.GetKey()] = h.GetValue()
			}
			want := map[string]string{"RateLimit-Limit": tt.limit, "RateLimit-Remaining": tt.remaining, "RateLimit-Reset": tt.reset}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("header %s: got %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}
