package envoyrls

import (
	"context"
	"unicode/utf8"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/dc/grpcapi"
	"github.com/weirhq/weir/internal/platform/pbwire"
	"github.com/weirhq/weir/pkg/envoyconf"
	"github.com/weirhq/weir/pkg/limiter"
)

// A request for a domain answered by Weir's rules is decoded from its
// wire form straight into the limiter's items, as weir.v1's Check is
// (internal/dc/grpcapi), rather than into the generated messages and then
// into items (toItems): each descriptor costs one string its keys and
// values are cut from, its map being reused from an earlier call (see
// fastRequest.reset). The fast path takes only the plain request
// Envoy sends — a domain, descriptors of entries with an optional
// hits_addend, and the request's hits_addend — whose items toItems would
// accept. Anything else (a field it does not know or in another wire type,
// a limit override, a string that is not UTF-8, what toItems refuses, bad
// framing) goes to proto.Unmarshal and ShouldRateLimit, which answer it as
// before, errors included. A request for a domain answered from an
// envoyproxy/ratelimit configuration is read the same way into a
// peerRequest, its descriptors' entries in one array. FuzzDecodeItems
// checks that what the fast path takes, it reads as proto.Unmarshal then
// toItems and peerRequestOf do.
//
// Neither path builds a request larger than the limiter takes: one of
// more than limiter.MaxItems descriptors, or a descriptor of more than
// limiter.MaxAttributes entries, for any domain, is refused with
// InvalidArgument as soon as the count passes the bound (checkBounds),
// before proto.Unmarshal would make a message of each of the millions
// of empty descriptors or entries that fit in the largest gRPC message.

// Field numbers of RateLimitRequest, RateLimitDescriptor, its Entry, and
// google.protobuf.UInt64Value.
const (
	reqDomain      protowire.Number = 1
	reqDescriptors protowire.Number = 2
	reqHitsAddend  protowire.Number = 3

	descEntries        protowire.Number = 1
	descHitsAddend     protowire.Number = 3
	descIsNegativeHits protowire.Number = 4

	entryKey   protowire.Number = 1
	entryValue protowire.Number = 2

	wrapperValue protowire.Number = 1
)

// eachField calls fn for each field of b, in order, until fn returns
// false (pbwire.Each). It reports whether every field was a varint or
// length-delimited field, well framed, and fn took it.
func eachField(b []byte, fn func(pbwire.Field) bool) bool {
	stopped, err := pbwire.Each(b, func(f pbwire.Field) bool {
		return (f.Type == protowire.VarintType || f.Type == protowire.BytesType) && fn(f)
	})
	return err == nil && !stopped
}

// fastRequest is what the fast path reads of a request's top level, and
// the buffers its reading fills. One that is reset and read again reuses
// them: the list of descriptors, the items and their attribute maps, the
// peer request's arrays, and the domain when the new one is the same. The
// ShouldRateLimit handler keeps them in a pool.
type fastRequest struct {
	domain      string
	descriptors [][]byte // each descriptor's bytes, within the request's
	hits        uint32   // the request's hits_addend

	last    string // the domain of an earlier read, reused when repeated (grpcapi.ReuseString)
	itemBuf []limiter.Item
	// touched is how many of itemBuf's items have been filled since the
	// last reset: the ones reset empties.
	touched int
	peerBuf peerRequest
	hitBuf  []uint64
	entries []envoyconf.Entry
}

// maxPooled bounds the descriptors whose buffers a reset fastRequest
// keeps: a request of more (up to limiter.MaxItems) allocates its own.
const maxPooled = 16

// read reads the top level of a request, b, into r, new or reset, or
// reports false.
func (r *fastRequest) read(b []byte) bool {
	ok := eachField(b, func(f pbwire.Field) bool {
		switch {
		case f.Num == reqDomain && f.Type == protowire.BytesType && utf8.Valid(f.Bytes):
			r.domain = grpcapi.ReuseString(&r.last, f.Bytes)
		case f.Num == reqDescriptors && f.Type == protowire.BytesType:
			if len(r.descriptors) == limiter.MaxItems {
				return false // more than a request may hold: the old path refuses it
			}
			r.descriptors = append(r.descriptors, f.Bytes)
		case f.Num == reqHitsAddend && f.Type == protowire.VarintType:
			r.hits = uint32(f.Varint)
		default:
			return false
		}
		return true
	})
	return ok && r.domain != "" && len(r.descriptors) > 0
}

// reset empties r for another read, keeping its buffers (see maxPooled)
// but nothing they referred to: not the request's bytes, which grpc-go
// reuses, nor its strings. The items' maps are kept, emptied.
func (r *fastRequest) reset() {
	r.domain, r.hits = "", 0
	r.descriptors = emptied(r.descriptors, maxPooled)
	// Only the items filled: the others were emptied by an earlier reset
	// (a single-descriptor request would otherwise pay for as many maps
	// as the largest request this one served).
	for i := range r.itemBuf[:r.touched] {
		m := r.itemBuf[i].Attributes
		clear(m)
		r.itemBuf[i] = limiter.Item{Attributes: m}
	}
	r.touched = 0
	if cap(r.itemBuf) > maxPooled {
		r.itemBuf = nil
	}
	r.peerBuf.reset()
	r.hitBuf = emptied(r.hitBuf, maxPooled)
	r.entries = emptied(r.entries, maxPooled*limiter.MaxAttributes)
}

// emptied returns s cleared and of length 0, or nil when its capacity is
// past most.
func emptied[T any](s []T, most int) []T {
	if cap(s) > most {
		return nil
	}
	clear(s[:cap(s)])
	return s[:0]
}

// resized returns s of length n, zeroed, reusing its array when it is
// large enough.
func resized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// items builds the limiter's items of r's descriptors, as toItems builds
// them, or reports false.
func (r *fastRequest) items() ([]limiter.Item, bool) {
	if cap(r.itemBuf) < len(r.descriptors) {
		r.itemBuf = make([]limiter.Item, len(r.descriptors))
	}
	items := r.itemBuf[:len(r.descriptors)]
	r.touched = max(r.touched, len(items))
	for i, d := range r.descriptors {
		it := &items[i]
		kept := it.Attributes // empty: a reset's, or new
		*it = limiter.Item{Exact: true}
		entries := 0
		var hits uint64
		ownHits := false
		ok := eachField(d, func(f pbwire.Field) bool {
			switch {
			case f.Num == descEntries && f.Type == protowire.BytesType:
				// More than the limiter takes: left to checkBounds.
				if entries++; entries > limiter.MaxAttributes {
					return false
				}
			case f.Num == descHitsAddend && f.Type == protowire.BytesType && !ownHits:
				var ok bool
				hits, ok = readUInt64Value(f.Bytes)
				ownHits = true
				return ok
			case f.Num == descIsNegativeHits && f.Type == protowire.VarintType && f.Varint == 0:
			default:
				return false
			}
			return true
		})
		if !ok {
			return nil, false
		}
		if !ownHits {
			hits = uint64(r.hits)
		}
		if hits > limiter.MaxHits {
			return nil, false
		}
		it.Hits = int64(hits)
		it.Attributes = kept
		if kept == nil {
			it.Attributes = make(map[string]string, entries)
		}
		// Keys and values are cut from a copy of the descriptor: what
		// keeps one (a Match.Key) keeps the descriptor's bytes, at most a
		// request's; the long-lived keepers (usage, topk) copy.
		s := string(d)
		ok = eachField(d, func(f pbwire.Field) bool {
			if f.Num != descEntries {
				return true
			}
			k, v, ok := readEntry(f.Bytes, f.In(s))
			if !ok || k == "" || len(k) > limiter.MaxNameLen || len(v) > limiter.MaxValueLen {
				return false
			}
			n := len(it.Attributes)
			it.Attributes[k] = v
			return len(it.Attributes) > n // a key repeated: toItems refuses it
		})
		if !ok {
			return nil, false
		}
	}
	return items, true
}

// peer reads r's descriptors as the peer path reads them (peerRequestOf),
// into r's own peer request, or reports false: a descriptor with its own
// limit, like anything unusual, is left to proto.Unmarshal.
func (r *fastRequest) peer() (*peerRequest, bool) {
	pr := &r.peerBuf
	pr.domain, pr.hits, pr.descs = r.domain, r.hits, resized(pr.descs, len(r.descriptors))
	r.hitBuf = resized(r.hitBuf, len(r.descriptors))
	hits := r.hitBuf
	n := 0
	for i, d := range r.descriptors {
		pd := &pr.descs[i]
		entries := 0
		ok := eachField(d, func(f pbwire.Field) bool {
			switch {
			case f.Num == descEntries && f.Type == protowire.BytesType:
				// More than the limiter takes: left to checkBounds.
				if entries++; entries > limiter.MaxAttributes {
					return false
				}
				n++
			case f.Num == descHitsAddend && f.Type == protowire.BytesType && pd.hits == nil:
				var ok bool
				hits[i], ok = readUInt64Value(f.Bytes)
				pd.hits = &hits[i]
				return ok
			case f.Num == descIsNegativeHits && f.Type == protowire.VarintType:
				// The peer path ignores it.
			default:
				return false
			}
			return true
		})
		if !ok {
			return nil, false
		}
	}
	all := resized(r.entries, n)[:0] // one array for every descriptor's entries
	r.entries = all
	for i, d := range r.descriptors {
		start := len(all)
		var s string
		ok := eachField(d, func(f pbwire.Field) bool {
			if f.Num != descEntries {
				return true
			}
			if s == "" {
				s = string(d)
			}
			k, v, ok := readEntry(f.Bytes, f.In(s))
			all = append(all, envoyconf.Entry{Key: k, Value: v})
			return ok
		})
		if !ok {
			return nil, false
		}
		pr.descs[i].entries = all[start:len(all):len(all)]
	}
	return pr, true
}

// checkBounds refuses a request, b, of more descriptors or entries in a
// descriptor than the limiter takes, with InvalidArgument and the field at
// fault, reading no further than the first one past the bound and
// building nothing. Bad framing is left to proto.Unmarshal: checkBounds
// then returns nil, or the error of a bound passed before it.
func checkBounds(b []byte) error {
	descs := 0
	var err error
	_, _ = pbwire.Each(b, func(f pbwire.Field) bool {
		if f.Num != reqDescriptors || f.Type != protowire.BytesType {
			return true
		}
		if descs++; descs > limiter.MaxItems {
			err = status.Errorf(codes.InvalidArgument, "descriptors: more than %d, at most %d", limiter.MaxItems, limiter.MaxItems)
			return false
		}
		entries := 0
		_, _ = pbwire.Each(f.Bytes, func(e pbwire.Field) bool {
			if e.Num == descEntries && e.Type == protowire.BytesType {
				entries++
			}
			return entries <= limiter.MaxAttributes
		})
		if entries > limiter.MaxAttributes {
			err = status.Errorf(codes.InvalidArgument, "descriptors[%d].entries: more than %d, at most %d", descs-1, limiter.MaxAttributes, limiter.MaxAttributes)
			return false
		}
		return true
	})
	return err
}

// readUInt64Value reads a google.protobuf.UInt64Value, or reports false.
func readUInt64Value(b []byte) (v uint64, ok bool) {
	ok = eachField(b, func(f pbwire.Field) bool {
		v = f.Varint
		return f.Num == wrapperValue && f.Type == protowire.VarintType
	})
	return v, ok
}

// readEntry reads an entry, b, whose bytes s holds too: its key and value
// are cut from s.
func readEntry(b []byte, s string) (key, value string, ok bool) {
	ok = eachField(b, func(f pbwire.Field) bool {
		if f.Type != protowire.BytesType || !utf8.Valid(f.Bytes) {
			return false
		}
		switch f.Num {
		case entryKey:
			key = f.In(s)
		case entryValue:
			value = f.In(s)
		default:
			return false
		}
		return true
	})
	return key, value, ok
}

// requestParser parses a ShouldRateLimit request: by the fast path when
// it can (into items for Weir's rules, into a peerRequest for a domain
// from an envoyproxy/ratelimit configuration), else into the generated
// message.
type requestParser struct {
	svc    *Service
	domain string
	items  []limiter.Item
	peer   *peerRequest
	tree   *envoyconf.Domain // the peer's configuration
	req    *rlsv3.RateLimitRequest
	fast   fastRequest // what the fast path read, and its buffers
}

// ParseWire implements grpcapi.WireParser. A request of more descriptors
// or entries than the limiter takes gets checkBounds' InvalidArgument.
func (p *requestParser) ParseWire(b []byte, depth int) error {
	if r := &p.fast; r.read(b) {
		if tree := p.svc.cfg.Configs(r.domain); tree == nil {
			if items, ok := r.items(); ok {
				p.domain, p.items = r.domain, items
				return nil
			}
		} else if pr, ok := r.peer(); ok {
			p.peer, p.tree = pr, tree
			return nil
		}
	}
	if err := checkBounds(b); err != nil {
		return err
	}
	p.req = &rlsv3.RateLimitRequest{}
	return proto.UnmarshalOptions{RecursionLimit: depth}.Unmarshal(b, p.req)
}

// requestDecoder is the grpcapi.WireMessage ShouldRateLimit's handler
// decodes into. What reads the decoded request as a message instead (a
// stats handler's InPayload, grpc-go's request tracing) sees an empty
// RateLimitRequest; binary logging records the bytes.
type requestDecoder struct {
	grpcapi.WireMessage
	empty rlsv3.RateLimitRequest
	p     requestParser
}

// shouldRateLimitHandler serves ShouldRateLimit, decoding its request as
// above. With an interceptor (which is handed the request), it is
// generated, the generated handler.
func shouldRateLimitHandler(generated grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		if ic != nil {
			return generated(srv, ctx, dec, ic)
		}
		svc := srv.(*Service)
		d := svc.decoders.Get().(*requestDecoder)
		// Nothing holds the request once it is answered: the answer
		// refers to none of its items, entries or strings.
		defer svc.putDecoder(d)
		if err := grpcapi.Decode(dec, &d.WireMessage); err != nil {
			return nil, err
		}
		return d.p.answer(ctx)
	}
}

// newDecoder returns an empty requestDecoder of s, for s.decoders.
func (s *Service) newDecoder() any {
	d := &requestDecoder{p: requestParser{svc: s}}
	d.Init(&d.empty, &d.p)
	return d
}

// putDecoder resets d, done with, and pools it.
func (s *Service) putDecoder(d *requestDecoder) {
	p := &d.p
	p.domain, p.items, p.peer, p.tree, p.req = "", nil, nil, nil, nil
	p.fast.reset()
	s.decoders.Put(d)
}

// answer answers the request p parsed.
func (p *requestParser) answer(ctx context.Context) (*rlsv3.RateLimitResponse, error) {
	switch {
	case p.items != nil:
		return p.svc.decideItems(ctx, p.domain, p.items)
	case p.peer != nil:
		return p.svc.answerPeer(ctx, p.peer, p.tree)
	}
	return p.svc.ShouldRateLimit(ctx, p.req)
}

// ShouldRateLimitWire answers a request given in wire form as the server
// Register sets up does. A request that does not decode, or holds more
// descriptors or entries than the limiter takes, gets
// codes.InvalidArgument; the other errors are ShouldRateLimit's.
func (s *Service) ShouldRateLimitWire(ctx context.Context, req []byte) (*rlsv3.RateLimitResponse, error) {
	d := s.decoders.Get().(*requestDecoder)
	defer s.putDecoder(d)
	p := &d.p
	if err := p.ParseWire(req, protowire.DefaultRecursionLimit); err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err // checkBounds'
		}
		return nil, status.Error(codes.InvalidArgument, "malformed request: "+err.Error())
	}
	return p.answer(ctx)
}
