package envoyrls

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weirhq/weir/pkg/limiter"
)

// plainRequests are requests as Envoy sends them to a domain of Weir's
// rules: the fast path must take them.
func plainRequests() []*rlsv3.RateLimitRequest {
	desc := func(kv ...string) *rlcommonv3.RateLimitDescriptor {
		d := &rlcommonv3.RateLimitDescriptor{}
		for i := 0; i < len(kv); i += 2 {
			d.Entries = append(d.Entries, &rlcommonv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		return d
	}
	many := &rlsv3.RateLimitRequest{Domain: "bench", HitsAddend: 2}
	for i := range 16 {
		many.Descriptors = append(many.Descriptors, desc("bench", "under", "user_id", "u"+strconv.Itoa(i)))
	}
	own := desc("k", "v")
	own.HitsAddend = &wrapperspb.UInt64Value{Value: 7}
	zero := desc("k", "")
	zero.HitsAddend = &wrapperspb.UInt64Value{}
	return []*rlsv3.RateLimitRequest{
		{Domain: "api", Descriptors: []*rlcommonv3.RateLimitDescriptor{desc("generic_key", "x")}},
		many,
		{Domain: "ünï", HitsAddend: 3, Descriptors: []*rlcommonv3.RateLimitDescriptor{own, zero, desc()}},
	}
}

// oddRequests are wire forms the fast path may leave to proto.Unmarshal.
func oddRequests(t testing.TB) [][]byte {
	tag := protowire.AppendTag
	field := func(b []byte, num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(tag(b, num, protowire.BytesType), v)
	}
	varint := func(b []byte, num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(tag(b, num, protowire.VarintType), v)
	}
	entry := func(k, v string) []byte { return field(field(nil, 1, []byte(k)), 2, []byte(v)) }
	desc := field(nil, 1, entry("k", "v"))
	domain := field(nil, 1, []byte("api"))
	req := func(parts ...[]byte) []byte {
		b := append([]byte(nil), domain...)
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	var out [][]byte
	for _, r := range plainRequests() {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b, b[:len(b)-1])
	}
	return append(out,
		req(field(nil, 2, append(append([]byte(nil), desc...), varint(nil, 9, 1)...))),                               // unknown field in a descriptor
		req(field(nil, 2, desc), varint(nil, 7, 1)),                                                                  // unknown field in the request
		req(field(nil, 2, field(field(nil, 1, entry("k", "v")), 2, varint(nil, 1, 5)))),                              // a limit override
		req(field(nil, 2, field(field(nil, 1, entry("k", "v")), 3, varint(varint(nil, 1, 4), 1, 9)))),                // hits_addend's value twice
		req(field(nil, 2, field(field(field(nil, 1, entry("k", "v")), 3, varint(nil, 1, 4)), 3, varint(nil, 1, 5)))), // hits_addend twice: merged
		req(field(nil, 2, varint(field(nil, 1, entry("k", "v")), 4, 1))),                                             // is_negative_hits
		req(field(nil, 2, varint(varint(field(nil, 1, entry("k", "v")), 4, 1), 4, 0))),                               // is_negative_hits, then not
		req(field(nil, 2, field(nil, 1, entry("k", "\xff")))),                                                        // value not UTF-8
		req(field(nil, 2, field(nil, 1, entry("", "v")))),                                                            // empty key
		req(field(nil, 2, field(nil, 1, entry(strings.Repeat("k", 200), "v")))),                                      // key too long
		req(field(nil, 2, field(nil, 1, entry("k", strings.Repeat("v", 2000))))),                                     // value too long
		req(field(nil, 2, append(field(nil, 1, entry("k", "a")), field(nil, 1, entry("k", "b"))...))),                // a key twice
		req(field(nil, 2, field(nil, 1, field(field(nil, 1, []byte("a")), 1, []byte("b"))))),                         // an entry's key twice: last wins
		req(field(nil, 2, field(nil, 3, varint(nil, 1, 1<<40)))),                                                     // hits past the most
		req(varint(nil, 3, 1<<33), field(nil, 2, desc)),                                                              // hits_addend past 32 bits (truncated), before the descriptors
		append(field(nil, 2, desc), req(varint(nil, 3, 5))...),                                                       // the domain and hits after the descriptors
		field(nil, 2, desc), // no domain
		domain,              // no descriptor
		req(field(field(nil, 2, desc), 1, []byte("other"))),                                       // the domain twice: last wins
		req(field(nil, 2, field(nil, 1, varint(nil, 1, 1)))),                                      // an entry's key as a varint
		req(field(nil, 2, tag(tag(nil, 5, protowire.StartGroupType), 5, protowire.EndGroupType))), // a group
		req([]byte("\xf0\xf0\xf0\xf00\xf0\xf00")),                                                 // a field number past the largest
	)
}

// busyRequest is the wire form of a request that fills a fastRequest's
// buffers: a dozen descriptors of several entries, some with their own
// hits_addend, in another domain.
var busyRequest = func() []byte {
	req := &rlsv3.RateLimitRequest{Domain: "other", HitsAddend: 4}
	for i := range 12 {
		d := &rlcommonv3.RateLimitDescriptor{}
		for _, k := range []string{"a", "b", "c", "d"} {
			d.Entries = append(d.Entries, &rlcommonv3.RateLimitDescriptor_Entry{Key: k, Value: k + strconv.Itoa(i)})
		}
		if i%3 == 0 {
			d.HitsAddend = &wrapperspb.UInt64Value{Value: uint64(i)}
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	b, err := proto.Marshal(req)
	if err != nil {
		panic(err)
	}
	return b
}()

// decodeBoth decodes b by the fast path, new and reset after reading
// another request (as the pooled ones are), and by proto.Unmarshal then
// toItems and peerRequestOf: where the fast path takes b, they must
// agree. It reports whether the fast path took b for items.
func decodeBoth(t *testing.T, b []byte) (taken bool) {
	t.Helper()
	var fresh fastRequest
	taken = decodeLikeProto(t, &fresh, b)
	var reused fastRequest
	if !reused.read(busyRequest) {
		t.Fatal("the fast path left the busy request to proto.Unmarshal")
	}
	if _, ok := reused.items(); !ok {
		t.Fatal("the fast path left the busy request's items to proto.Unmarshal")
	}
	if _, ok := reused.peer(); !ok {
		t.Fatal("the peer path left the busy request to proto.Unmarshal")
	}
	reused.reset()
	if again := decodeLikeProto(t, &reused, b); again != taken {
		t.Fatalf("a reused request took it: %v, a new one %v", again, taken)
	}
	return taken
}

// A pooled request read many times, of many descriptors, then few, then
// many again, reads each as a new one would: no item keeps an attribute
// of an earlier request (reset empties every item its last read filled,
// and only those).
func TestRequestReusedManyFewMany(t *testing.T) {
	request := func(descs int, tag string) []byte {
		req := &rlsv3.RateLimitRequest{Domain: "d"}
		for i := range descs {
			d := &rlcommonv3.RateLimitDescriptor{}
			// Each request's own keys: a kept one shows in the next.
			for _, k := range []string{tag + "x", tag + "y"} {
				d.Entries = append(d.Entries, &rlcommonv3.RateLimitDescriptor_Entry{Key: k + strconv.Itoa(i), Value: "v"})
			}
			req.Descriptors = append(req.Descriptors, d)
		}
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var r fastRequest
	for i, step := range []struct {
		descs int
		tag   string
	}{{16, "a"}, {1, "b"}, {3, "c"}, {16, "d"}, {2, "e"}, {16, "f"}} {
		if !decodeLikeProto(t, &r, request(step.descs, step.tag)) {
			t.Fatalf("step %d: the fast path left a plain request to proto.Unmarshal", i)
		}
		r.reset()
	}
}

// decodeLikeProto reads b into r by the fast path and compares it with
// proto.Unmarshal's, as decodeBoth.
func decodeLikeProto(t *testing.T, r *fastRequest, b []byte) (taken bool) {
	t.Helper()
	if !r.read(b) {
		return false
	}
	items, itemsOK := r.items()
	peer, peerOK := r.peer()
	if !itemsOK && !peerOK {
		return false
	}
	var want rlsv3.RateLimitRequest
	if err := proto.Unmarshal(b, &want); err != nil {
		t.Fatalf("fast path took what proto.Unmarshal refuses: %v", err)
	}
	if r.domain != want.GetDomain() {
		t.Fatalf("domain %q, want %q", r.domain, want.GetDomain())
	}
	if peerOK {
		wp := peerRequestOf(&want)
		if peer.domain != wp.domain || peer.hits != wp.hits || len(peer.descs) != len(wp.descs) {
			t.Fatalf("peer request %+v, want %+v", peer, wp)
		}
		for i, d := range peer.descs {
			w := wp.descs[i]
			if !slices.Equal(d.entries, w.entries) || d.limit != nil || w.limit != nil || (d.hits == nil) != (w.hits == nil) || d.hits != nil && *d.hits != *w.hits {
				t.Fatalf("peer descriptor %d: got %+v, want %+v", i, d, w)
			}
		}
	}
	if !itemsOK {
		return false
	}
	wantItems, err := toItems(&want)
	if err != nil {
		t.Fatalf("fast path took what toItems refuses: %v", err)
	}
	if len(items) != len(wantItems) {
		t.Fatalf("%d items, want %d", len(items), len(wantItems))
	}
	for i := range items {
		g, w := items[i], wantItems[i]
		if g.Hits != w.Hits || g.Exact != w.Exact || !maps.Equal(g.Attributes, w.Attributes) || (g.Attributes == nil) != (w.Attributes == nil) {
			t.Fatalf("item %d: got %+v, want %+v", i, g, w)
		}
	}
	return true
}

func TestDecodeItems(t *testing.T) {
	for i, req := range plainRequests() {
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if !decodeBoth(t, b) {
			t.Fatalf("request %d, as Envoy sends it: left to proto.Unmarshal", i)
		}
		var r fastRequest
		if !r.read(b) {
			t.Fatalf("request %d, as Envoy sends it: left to proto.Unmarshal", i)
		}
		if _, ok := r.peer(); !ok {
			t.Fatalf("request %d, as Envoy sends it: the peer path left it to proto.Unmarshal", i)
		}
	}
	for i, b := range oddRequests(t) {
		t.Run(strconv.Itoa(i), func(t *testing.T) { decodeBoth(t, b) })
	}
}

func FuzzDecodeItems(f *testing.F) {
	for _, b := range oddRequests(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { decodeBoth(t, b) })
}

// The decoded strings do not share the request's buffer, which grpc-go
// reuses once the request is decoded.
func TestDecodeItemsCopies(t *testing.T) {
	b, err := proto.Marshal(plainRequests()[0])
	if err != nil {
		t.Fatal(err)
	}
	var r fastRequest
	ok := r.read(b)
	items, ok2 := r.items()
	if !ok || !ok2 {
		t.Fatal("left to proto.Unmarshal")
	}
	for i := range b {
		b[i] = 'x'
	}
	if r.domain != "api" || items[0].Attributes["generic_key"] != "x" {
		t.Fatalf("after the buffer changed: domain %q, attributes %v", r.domain, items[0].Attributes)
	}
}

// jsonRequest is a RateLimitRequest in JSON of descs descriptors of
// entries entries each.
func jsonRequest(descs, entries int) string {
	var b strings.Builder
	b.WriteString(`{"domain":"d","hitsAddend":1,"descriptors":[`)
	for i := range descs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"entries":[`)
		for j := range entries {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"key":"k` + strconv.Itoa(j) + `","value":"v"}`)
		}
		b.WriteString(`],"limit":{"requestsPerUnit":3,"unit":"HOUR"},"hitsAddend":"2"}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// jsonBounds refuses a body of more descriptors, or entries in one, than
// the limiter takes, having read no further than the first past the bound
// (4 MiB of "{}," is refused for the cost of 257 descriptors), and leaves
// all else to protojson.
func TestJSONBounds(t *testing.T) {
	emptyDescs := `{"domain":"d","descriptors":[` + strings.Repeat("{},", 4<<20/3) + `{}]}`
	emptyEntries := `{"domain":"d","descriptors":[{"entries":[` + strings.Repeat("{},", 4<<20/3) + `{}]}]}`
	for _, tc := range []struct {
		name      string
		body      string
		ok        bool
		maxAllocs float64
	}{
		{"at the limits", jsonRequest(limiter.MaxItems, limiter.MaxAttributes), true, -1},
		{"descriptors past the limit", jsonRequest(limiter.MaxItems+1, 1), false, -1},
		{"entries past the limit", jsonRequest(1, limiter.MaxAttributes+1), false, -1},
		{"entries past the limit in the last descriptor", jsonRequest(limiter.MaxItems-1, 1)[:len(jsonRequest(limiter.MaxItems-1, 1))-2] + `,` + jsonRequest(1, limiter.MaxAttributes+1)[len(`{"domain":"d","hitsAddend":1,"descriptors":[`):], false, -1},
		{"4 MiB of empty descriptors", emptyDescs, false, 2*limiter.MaxItems + 64},
		{"4 MiB of empty entries", emptyEntries, false, 4*limiter.MaxAttributes + 64},
		{"the descriptors first", `{"descriptors":[` + strings.Repeat("{},", limiter.MaxItems) + `{}],"domain":"d"}`, false, -1},
		// Shapes protojson refuses where they are: followed no further.
		{"descriptors an object", `{"domain":"d","descriptors":{"entries":[]}}`, true, -1},
		{"a descriptor a list", `{"domain":"d","descriptors":[[]]}`, true, -1},
		{"an entry a list", `{"domain":"d","descriptors":[{"entries":[[1,2]]}]}`, true, -1},
		{"a domain of many members", `{"domain":{` + strings.Repeat(`"a":1,`, 100) + `"a":1}}`, true, -1},
		{"not JSON", `}`, true, -1},
		{"empty", ``, true, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			if got := jsonBounds(body); got != tc.ok {
				t.Fatalf("got %v, want %v", got, tc.ok)
			}
			if tc.maxAllocs < 0 {
				return
			}
			if allocs := testing.AllocsPerRun(3, func() { jsonBounds(body) }); allocs > tc.maxAllocs {
				t.Errorf("allocations: got %v, want at most %v", allocs, tc.maxAllocs)
			}
		})
	}
}
