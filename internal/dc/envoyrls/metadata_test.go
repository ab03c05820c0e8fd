package envoyrls_test

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weirhq/weir/internal/dc/envoyrls"
)

// peerMeta gives two limits metadata that overlap (name, team) and one
// unlimited descriptor metadata of its own.
const peerMeta = `
domain: meta
descriptors:
  - key: regular
    rate_limit: {unit: minute, requests_per_unit: 10}
    metadata: {name: service_1, team: {owner: a, tier: 1}}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {name: service_2, other: [x, 2, true, null], team: {owner: b, region: eu}}
  - key: free
    rate_limit: {unlimited: true}
    metadata: {free: yes}
`

// TestDynamicMetadata replays envoyproxy/ratelimit's
// RESPONSE_DYNAMIC_METADATA (its TestMetadataReturnedForPassedDescriptors,
// ...ForAllPassedDescriptors and TestOverlappingMetadataReturnsTheFirstValue,
// with the request's own fields besides), on a real Redis and on memory:
// the metadata of the descriptors not over their limits, merged in order,
// the first value of a key kept and objects merged, and the
// configuration's own metadata left as it was (a call after a merge sees
// none of it).
func TestDynamicMetadata(t *testing.T) {
	override := &rlcommonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_HOUR}
	withOverride := desc("regular", "1")
	withOverride.Limit, withOverride.HitsAddend = override, wrapperspb.UInt64(3)
	regularTeam := map[string]any{"owner": "a", "tier": 1}
	tests := []struct {
		name  string
		hits  uint32
		descs []*rlcommonv3.RateLimitDescriptor
		want  map[string]any
	}{
		{"both pass: merged, the first name kept, objects merged", 1, []*rlcommonv3.RateLimitDescriptor{desc("regular", "1"), desc("quota", "1")}, map[string]any{
			"domain": "meta", "hitsAddend": 1,
			"descriptors": []any{map[string]any{"entries": []any{"regular=1"}}, map[string]any{"entries": []any{"quota=1"}}},
			"metadata":    map[string]any{"name": "service_1", "other": []any{"x", 2, true, nil}, "team": map[string]any{"owner": "a", "tier": 1, "region": "eu"}},
		}},
		{"quota over: the regular one's alone, the configuration unchanged", 0, []*rlcommonv3.RateLimitDescriptor{desc("regular", "1"), desc("quota", "1")}, map[string]any{
			"domain":      "meta",
			"descriptors": []any{map[string]any{"entries": []any{"regular=1"}}, map[string]any{"entries": []any{"quota=1"}}},
			"metadata":    map[string]any{"name": "service_1", "team": regularTeam},
		}},
		{"unlimited and unknown: no metadata", 0, []*rlcommonv3.RateLimitDescriptor{desc("free", "1"), desc("nothing", "1")}, map[string]any{
			"domain":      "meta",
			"descriptors": []any{map[string]any{"entries": []any{"free=1"}}, map[string]any{"entries": []any{"nothing=1"}}},
		}},
		{"a descriptor's own limit and hits_addend", 0, []*rlcommonv3.RateLimitDescriptor{withOverride}, map[string]any{
			"domain":      "meta",
			"descriptors": []any{map[string]any{"entries": []any{"regular=1"}, "limit": override.String(), "hitsAddend": 3}},
		}},
	}
	for _, ps := range peerStores {
		for _, wire := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/wire %v", ps.name, wire), func(t *testing.T) {
				svc, _ := peerServiceWith(t, ps.open(t), envoyrls.Config{DynamicMetadata: true}, peerMeta)
				off, _ := peerServiceWith(t, ps.open(t), envoyrls.Config{}, peerMeta)
				for _, tt := range tests {
					req := &rlsv3.RateLimitRequest{Domain: "meta", HitsAddend: tt.hits, Descriptors: tt.descs}
					want, err := structpb.NewStruct(tt.want)
					if err != nil {
						t.Fatal(err)
					}
					if got := ask(t, svc, wire, req).GetDynamicMetadata(); !proto.Equal(got, want) {
						t.Errorf("%s: dynamic metadata:\ngot  %s\nwant %s", tt.name, protojson.Format(got), protojson.Format(want))
					}
					if got := ask(t, off, wire, req).GetDynamicMetadata(); got != nil {
						t.Errorf("%s: without the setting: got %v, want no dynamic metadata", tt.name, got)
					}
				}
			})
		}
	}
}

// metadataCall asks svc req, decoded or in wire form.
func ask(t *testing.T, svc *envoyrls.Service, wire bool, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	var resp *rlsv3.RateLimitResponse
	var err error
	if wire {
		b, merr := proto.Marshal(req)
		if merr != nil {
			t.Fatal(merr)
		}
		resp, err = svc.ShouldRateLimitWire(ctx(t), b)
	} else {
		resp, err = svc.ShouldRateLimit(ctx(t), req)
	}
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestDynamicMetadataNotFinite: a number in a descriptor's metadata that
// is not finite (.inf) goes out over gRPC as it is, as the peer sends it;
// the /json endpoint cannot write it in JSON and answers 500, as
// docs/envoy.md says.
func TestDynamicMetadataNotFinite(t *testing.T) {
	svc, _ := peerServiceWith(t, redisStore(t), envoyrls.Config{DynamicMetadata: true}, `
domain: meta
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 10}
    metadata: {weight: .inf}
`)
	req := &rlsv3.RateLimitRequest{Domain: "meta", Descriptors: []*rlcommonv3.RateLimitDescriptor{desc("k", "1")}}
	got := ask(t, svc, true, req).GetDynamicMetadata().GetFields()["metadata"].GetStructValue().GetFields()["weight"].GetNumberValue()
	if !math.IsInf(got, 1) {
		t.Errorf("over gRPC: got weight %v, want +Inf", got)
	}
	rec := httptest.NewRecorder()
	envoyrls.JSONHandler(svc).ServeHTTP(rec, httptest.NewRequest("POST", "/json", strings.NewReader(`{"domain":"meta","descriptors":[{"entries":[{"key":"k","value":"1"}]}]}`)))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("/json: got %d %s, want 500", rec.Code, rec.Body)
	}
}
