package rulefile_test

import (
	"math"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/weirhq/weir/pkg/envoyconf"
	"github.com/weirhq/weir/pkg/rulefile"
)

// TestParseEnvoyMetadata: a descriptor's metadata is read as
// envoyproxy/ratelimit's YAML reader reads it, and kept with its limit:
// nested objects and lists, a repeated key's last value, numbers that are
// not finite, null; a file the peer loads is never refused for it.
func TestParseEnvoyMetadata(t *testing.T) {
	e, err := rulefile.ParseEnvoyConfig([]byte(`
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata:
      service: checkout
      team: {owner: a, owner: b, tier: 1}
      tags: [x, 2, true, null]
      weight: .inf
      off: ~
  - key: b
    metadata: {not: used}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := e.Tree.Lookup([]envoyconf.Entry{{Key: "a", Value: "1"}}).Limit.Metadata
	want, err := structpb.NewStruct(map[string]any{
		"service": "checkout",
		"team":    map[string]any{"owner": "b", "tier": 1},
		"tags":    []any{"x", 2, true, nil},
		"weight":  math.Inf(1),
		"false":   nil, // YAML 1.1 reads the key off as false (docs/envoy.md)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Errorf("metadata:\ngot  %v\nwant %v", got, want)
	}
}
