package grpcapi

import (
	"bytes"
	"errors"
	"maps"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/pkg/limiter"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// checkSeeds are wire forms of CheckRequests, well formed and not: the
// cases table of TestDecodeCheck and the seed corpus of FuzzDecodeCheck.
func checkSeeds(t testing.TB) map[string][]byte {
	marshal := func(m *weirv1.CheckRequest) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tag := protowire.AppendTag
	str := func(b []byte, num protowire.Number, s string) []byte {
		return protowire.AppendString(tag(b, num, protowire.BytesType), s)
	}
	msg := func(b []byte, num protowire.Number, m []byte) []byte {
		return protowire.AppendBytes(tag(b, num, protowire.BytesType), m)
	}
	entry := func(k, v string) []byte { return str(str(nil, 1, k), 2, v) }
	valid := marshal(&weirv1.CheckRequest{Domain: "api", Items: []*weirv1.CheckItem{
		{Attributes: map[string]string{"user_id": "ann", "path": "/a"}, Hits: 3},
		{},
		{Hits: 1},
		{Attributes: map[string]string{"": "", "ip": "203.0.113.7"}},
	}})
	var unknown []byte
	unknown = protowire.AppendVarint(tag(unknown, 9, protowire.VarintType), 7)
	unknown = protowire.AppendFixed64(tag(unknown, 10, protowire.Fixed64Type), 7)
	unknown = protowire.AppendFixed32(tag(unknown, 11, protowire.Fixed32Type), 7)
	unknown = str(unknown, 12, "x")
	unknown = tag(tag(unknown, 13, protowire.StartGroupType), 13, protowire.EndGroupType)
	item := msg(nil, 1, entry("user_id", "bob"))
	item = protowire.AppendVarint(tag(item, 2, protowire.VarintType), 5)
	return map[string][]byte{
		"empty":                   nil,
		"valid":                   valid,
		"unknown fields":          append(append([]byte(nil), unknown...), msg(str(nil, 1, "d"), 2, append(append([]byte(nil), unknown...), item...))...),
		"unknown in entry":        msg(nil, 2, msg(nil, 1, append(entry("k", "v"), unknown...))),
		"fields repeated":         msg(str(str(nil, 1, "first"), 1, "last"), 2, append(append(append([]byte(nil), item...), msg(nil, 1, entry("user_id", "cat"))...), protowire.AppendVarint(tag(nil, 2, protowire.VarintType), 9)...)),
		"entry without key":       msg(nil, 2, msg(nil, 1, str(nil, 2, "v"))),
		"entry without value":     msg(nil, 2, msg(nil, 1, str(nil, 1, "k"))),
		"entry fields repeated":   msg(nil, 2, msg(nil, 1, append(entry("a", "1"), entry("b", "2")...))),
		"domain as varint":        msg(protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 1), 2, item),
		"items as varint":         protowire.AppendVarint(tag(nil, 2, protowire.VarintType), 1),
		"hits as bytes":           msg(nil, 2, str(nil, 2, "5")),
		"attributes as fixed":     msg(nil, 2, protowire.AppendFixed32(tag(nil, 1, protowire.Fixed32Type), 1)),
		"entry key as varint":     msg(nil, 2, msg(nil, 1, protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 1))),
		"negative hits":           msg(nil, 2, protowire.AppendVarint(tag(nil, 2, protowire.VarintType), uint64(1<<64-1))),
		"all or nothing":          marshal(&weirv1.CheckRequest{Items: []*weirv1.CheckItem{{Hits: 2}}, AllOrNothing: true}),
		"all or nothing large":    protowire.AppendVarint(tag(msg(nil, 2, nil), 3, protowire.VarintType), 1<<40),
		"all or nothing then not": protowire.AppendVarint(tag(protowire.AppendVarint(tag(nil, 3, protowire.VarintType), 1), 3, protowire.VarintType), 0),
		"all or nothing as bytes": str(msg(nil, 2, nil), 3, "\x01"),
		"domain not UTF-8":        str(nil, 1, "\xff"),
		"key not UTF-8":           msg(nil, 2, msg(nil, 1, entry("\xc3", "v"))),
		"value not UTF-8":         msg(nil, 2, msg(nil, 1, entry("k", "\xed\xa0\x80"))),
		"truncated":               valid[:len(valid)-3],
		"truncated item":          msg(nil, 2, item[:len(item)-1]),
		"length past the end":     append(tag(nil, 2, protowire.BytesType), 0x7f, 1),
		"field number 0":          protowire.AppendVarint(nil, 0),
		"lone end group":          tag(nil, 5, protowire.EndGroupType),
		"group in item":           msg(nil, 2, tag(tag(nil, 7, protowire.StartGroupType), 7, protowire.EndGroupType)),
		"unclosed group":          tag(nil, 7, protowire.StartGroupType),
		"reserved wire type":      protowire.AppendVarint(nil, 1<<3|6),
		"items at the limit":      bytes.Repeat(msg(nil, 2, nil), limiter.MaxItems),
		"items past the limit":    bytes.Repeat(msg(nil, 2, nil), limiter.MaxItems+1),
		"attributes at the limit": msg(nil, 2, func() (b []byte) {
			for i := range limiter.MaxAttributes {
				b = msg(b, 1, entry(strconv.Itoa(i), "v"))
			}
			return b
		}()),
		"attributes past the limit": msg(nil, 2, func() (b []byte) {
			for i := range limiter.MaxAttributes + 1 {
				b = msg(b, 1, entry(strconv.Itoa(i), "v"))
			}
			return b
		}()),
		"one name repeated past the limit": msg(nil, 2, bytes.Repeat(msg(nil, 1, entry("k", "v")), limiter.MaxAttributes+10)),
	}
}

// busyRequest is the wire form of a request with more items than a
// checkRequest keeps maps for, each with attributes, in another domain:
// what a pooled checkRequest may have decoded last.
var busyRequest = func() []byte {
	req := &weirv1.CheckRequest{Domain: "other"}
	for i := range 18 {
		req.Items = append(req.Items, &weirv1.CheckItem{Attributes: map[string]string{"user_id": string(rune('a' + i)), "path": "/p", "k": "v"}, Hits: 2})
	}
	b, err := proto.Marshal(req)
	if err != nil {
		panic(err)
	}
	return b
}()

// decodeBoth decodes b with checkRequest, new and reset after decoding
// another request (as the pooled ones are), and with proto.Unmarshal, and
// reports where they differ.
func decodeBoth(t *testing.T, b []byte) {
	t.Helper()
	var fresh checkRequest
	decodeLikeProto(t, &fresh, b)
	var reused checkRequest
	if err := reused.decode(busyRequest); err != nil {
		t.Fatal(err)
	}
	reused.reset()
	decodeLikeProto(t, &reused, b)
}

// decodeLikeProto decodes b into got and reports where it differs from
// proto.Unmarshal, except that a request the limiter refuses for its size
// (oversized) must be refused with limiter.ErrInvalid.
func decodeLikeProto(t *testing.T, got *checkRequest, b []byte) {
	t.Helper()
	gotErr := got.decode(b)
	var want weirv1.CheckRequest
	wantErr := proto.Unmarshal(b, &want)
	if wantErr == nil && oversized(&want) {
		if !errors.Is(gotErr, limiter.ErrInvalid) {
			t.Fatalf("a request of %d items the limiter refuses: got %v, want limiter.ErrInvalid", len(want.GetItems()), gotErr)
		}
		return
	}
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("error: got %v, proto.Unmarshal %v", gotErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	if got.domain != want.GetDomain() {
		t.Fatalf("domain: got %q, want %q", got.domain, want.GetDomain())
	}
	if got.allOrNothing != want.GetAllOrNothing() {
		t.Fatalf("all_or_nothing: got %v, want %v", got.allOrNothing, want.GetAllOrNothing())
	}
	if len(got.items) != len(want.GetItems()) {
		t.Fatalf("items: got %d, want %d", len(got.items), len(want.GetItems()))
	}
	for i, w := range want.GetItems() {
		g := got.items[i]
		if g.Hits != w.GetHits() {
			t.Fatalf("item %d: hits %d, want %d", i, g.Hits, w.GetHits())
		}
		if !maps.Equal(g.Attributes, w.GetAttributes()) {
			t.Fatalf("item %d: attributes %v, want %v", i, g.Attributes, w.GetAttributes())
		}
	}
}

// oversized reports whether the limiter refuses r for its size: more than
// limiter.MaxItems items, or an item of more than limiter.MaxAttributes
// attributes.
func oversized(r *weirv1.CheckRequest) bool {
	if len(r.GetItems()) > limiter.MaxItems {
		return true
	}
	for _, it := range r.GetItems() {
		if len(it.GetAttributes()) > limiter.MaxAttributes {
			return true
		}
	}
	return false
}

// The decoder accepts and refuses what proto.Unmarshal does, and reads
// the same request from what it accepts.
func TestDecodeCheck(t *testing.T) {
	for name, b := range checkSeeds(t) {
		t.Run(name, func(t *testing.T) { decodeBoth(t, b) })
	}
}

func FuzzDecodeCheck(f *testing.F) {
	for _, b := range checkSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(decodeBoth)
}

// The decoded strings do not share the request's buffer, which grpc-go
// reuses once the request is decoded.
func TestDecodeCheckCopies(t *testing.T) {
	b, err := proto.Marshal(&weirv1.CheckRequest{Domain: "api", Items: []*weirv1.CheckItem{{Attributes: map[string]string{"user_id": "ann"}}}})
	if err != nil {
		t.Fatal(err)
	}
	var r checkRequest
	if err := r.decode(b); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 'x'
	}
	if r.domain != "api" || r.items[0].Attributes["user_id"] != "ann" {
		t.Fatalf("after the buffer changed: domain %q, attributes %v", r.domain, r.items[0].Attributes)
	}
}

// A reset request keeps its first items' maps, emptied, but not a map
// grown past what the limiter accepts: one that a refused request, decoded
// after another into the same checkRequest, filled to one past the bound.
func TestCheckRequestReset(t *testing.T) {
	attrs := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[strconv.Itoa(i)] = "v"
		}
		return m
	}
	wire := func(t *testing.T, attrs map[string]string) []byte {
		b, err := proto.Marshal(&weirv1.CheckRequest{Domain: "api", Items: []*weirv1.CheckItem{{Attributes: attrs}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		attrs   map[string]string
		refused bool
		kept    bool
	}{
		{"small", map[string]string{"user_id": "ann"}, false, true},
		{"at the limit", attrs(limiter.MaxAttributes), false, true},
		{"past the limit", attrs(limiter.MaxAttributes + 1), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r checkRequest
			if err := r.decode(wire(t, map[string]string{"user_id": "ann"})); err != nil {
				t.Fatal(err)
			}
			r.reset() // r.buf[0] keeps its map, which the next decode fills
			if err := r.decode(wire(t, tc.attrs)); (err != nil) != tc.refused {
				t.Fatalf("decode: got %v, want refused %v", err, tc.refused)
			}
			r.reset()
			if r.domain != "" || r.items != nil {
				t.Fatalf("after reset: domain %q, %d items", r.domain, len(r.items))
			}
			m := r.buf[0].Attributes
			if kept := m != nil; kept != tc.kept {
				t.Fatalf("map kept: %v, want %v", kept, tc.kept)
			}
			if len(m) != 0 {
				t.Fatalf("kept map not emptied: %v", m)
			}
		})
	}
}

// A request the limiter refuses for its size is refused as soon as the
// count passes the bound, at the cost of a request the limiter accepts,
// however much follows: 4 MiB of empty items (the largest message the
// limiter's gRPC server takes) once grew the limiter by 900 MB before the
// limiter refused it. Allocation counts and bytes are deterministic, unlike
// time.
func TestDecodeCheckRefusesEarly(t *testing.T) {
	tag := protowire.AppendTag
	msg := func(b []byte, num protowire.Number, m []byte) []byte {
		return protowire.AppendBytes(tag(b, num, protowire.BytesType), m)
	}
	entry := func(k string) []byte {
		b := protowire.AppendString(tag(nil, 1, protowire.BytesType), k)
		return protowire.AppendString(tag(b, 2, protowire.BytesType), "v")
	}
	distinct := func(n int) []byte { // one item of n distinct names
		var b []byte
		for i := range n {
			b = msg(b, 1, entry(strconv.Itoa(i)))
		}
		return msg(nil, 2, b)
	}
	const size = 4 << 20
	// The bounds are loose (the race detector and the runtime add a few
	// allocations from run to run): what they tell apart is a decoding
	// that stops at the bound from one that builds millions of items.
	for _, tc := range []struct {
		name      string
		req       []byte
		want      string
		maxAllocs float64
		maxBytes  uint64
	}{
		// 0x12 0x00: an empty item, 2,097,152 of them.
		{"4 MiB of empty items", bytes.Repeat([]byte{0x12, 0x00}, size/2),
			"limiter: invalid request: more than 256 items, want 1 to 256", 64, 256 << 10},
		{"4 MiB of items of one attribute", bytes.Repeat(msg(nil, 2, msg(nil, 1, entry("k"))), size/11),
			"limiter: invalid request: more than 256 items, want 1 to 256", 3*limiter.MaxItems + 64, 512 << 10},
		{"an item of 400,000 distinct names", distinct(400_000),
			"item 0: limiter: invalid request: more than 64 attributes", 64, 5<<20 + 64<<10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r checkRequest
			err := r.decode(tc.req)
			if err == nil || err.Error() != tc.want || !errors.Is(err, limiter.ErrInvalid) {
				t.Fatalf("got %v, want %q wrapping limiter.ErrInvalid", err, tc.want)
			}
			if n := len(r.items); n > limiter.MaxItems {
				t.Errorf("built %d items, want at most %d", n, limiter.MaxItems)
			}
			allocs := testing.AllocsPerRun(3, func() {
				var r checkRequest
				_ = r.decode(tc.req)
			})
			if allocs > tc.maxAllocs {
				t.Errorf("allocations: got %v, want at most %v", allocs, tc.maxAllocs)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			var r2 checkRequest
			_ = r2.decode(tc.req)
			runtime.ReadMemStats(&after)
			if got := after.TotalAlloc - before.TotalAlloc; got > tc.maxBytes {
				t.Errorf("bytes allocated: got %d, want at most %d", got, tc.maxBytes)
			}
		})
	}
}

func BenchmarkDecodeCheck(b *testing.B) {
	req := &weirv1.CheckRequest{Domain: "bench"}
	for i := range 16 {
		req.Items = append(req.Items, &weirv1.CheckItem{Attributes: map[string]string{"bench": "under", "user_id": "u" + string(rune('a'+i))}})
	}
	wire, err := proto.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("weir", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r checkRequest
			if err := r.decode(wire); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("weir-reused", func(b *testing.B) {
		b.ReportAllocs()
		var r checkRequest
		for b.Loop() {
			if err := r.decode(wire); err != nil {
				b.Fatal(err)
			}
			r.reset()
		}
	})
	b.Run("proto.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r weirv1.CheckRequest
			if err := proto.Unmarshal(wire, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// ReuseString keeps a short string for the next call, not a long one, and
// reuses what it keeps without copying.
func TestReuseString(t *testing.T) {
	long := strings.Repeat("d", maxReused+1)
	for _, tc := range []struct {
		name, last, in, wantLast string
	}{
		{"same", "api", "api", "api"},
		{"another", "api", "web", "web"},
		{"first", "", "api", "api"},
		{"long", "api", long, "api"},
		{"at the bound", "api", long[1:], long[1:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			last := tc.last
			if got := ReuseString(&last, []byte(tc.in)); got != tc.in {
				t.Fatalf("got %q, want %q", got, tc.in)
			}
			if last != tc.wantLast {
				t.Fatalf("kept %q, want %q", last, tc.wantLast)
			}
		})
	}
	last, b := "api", []byte("api")
	if n := testing.AllocsPerRun(100, func() { ReuseString(&last, b) }); n != 0 {
		t.Fatalf("a repeated string allocates %v times", n)
	}
}
