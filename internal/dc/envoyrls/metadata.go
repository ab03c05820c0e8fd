package envoyrls

import (
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// dynamicMetadata returns the dynamic metadata of the answer to req, as
// envoyproxy/ratelimit sets it with RESPONSE_DYNAMIC_METADATA
// (ratelimitToMetadata in its src/service/ratelimit.go):
//
//   - "domain": the request's domain;
//   - "descriptors": one object per descriptor, in order: "entries", a
//     list of "key=value" texts; "limit", the descriptor's own limit in
//     protobuf's text form, when it has one; "hitsAddend", its own
//     hits_addend, when it has one;
//   - "hitsAddend": the request's hits_addend, when not 0;
//   - "metadata": the metadata of the limits of the descriptors that are
//     not over their limits (unlimited ones aside), merged in the order
//     of the descriptors: a key already there keeps its first value, but
//     two objects at one key are merged the same way; absent when none
//     has any.
//
// The configuration's metadata is copied, never shared with the answer.
func dynamicMetadata(req *peerRequest, limits []peerLimit, statuses []*rlsv3.RateLimitResponse_DescriptorStatus) *structpb.Struct {
	descs := make([]*structpb.Value, len(req.descs))
	for i := range req.descs {
		d := &req.descs[i]
		entries := make([]*structpb.Value, len(d.entries))
		for j, e := range d.entries {
			entries[j] = structpb.NewStringValue(e.Key + "=" + e.Value)
		}
		f := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
		if d.limit != nil {
			f["limit"] = structpb.NewStringValue(d.limit.String())
		}
		if d.hits != nil {
			f["hitsAddend"] = structpb.NewNumberValue(float64(*d.hits))
		}
		descs[i] = structpb.NewStructValue(&structpb.Struct{Fields: f})
	}
	out := &structpb.Struct{Fields: map[string]*structpb.Value{
		"domain":      structpb.NewStringValue(req.domain),
		"descriptors": structpb.NewListValue(&structpb.ListValue{Values: descs}),
	}}
	if req.hits != 0 {
		out.Fields["hitsAddend"] = structpb.NewNumberValue(float64(req.hits))
	}
	var passed *structpb.Struct
	for i := range limits {
		l := limits[i].limit
		if limits[i].unlimited || statuses[i].Code == rlsv3.RateLimitResponse_OVER_LIMIT || l == nil || l.Metadata == nil {
			continue
		}
		if passed == nil {
			passed = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		}
		mergeMetadata(passed, l.Metadata)
	}
	if passed != nil && len(passed.Fields) > 0 {
		out.Fields["metadata"] = structpb.NewStructValue(passed)
	}
	return out
}

// mergeMetadata adds src's fields to dst: a field dst does not have as a
// copy of src's, and two objects at one key merged the same way; a key
// dst has keeps its value otherwise.
func mergeMetadata(dst, src *structpb.Struct) {
	for k, v := range src.GetFields() {
		have, ok := dst.Fields[k]
		switch {
		case !ok:
			dst.Fields[k] = proto.Clone(v).(*structpb.Value)
		case have.GetStructValue() != nil && v.GetStructValue() != nil:
			mergeMetadata(have.GetStructValue(), v.GetStructValue())
		}
	}
}
