package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/weirhq/weir/internal/platform/pbwire"
	"github.com/weirhq/weir/pkg/limiter"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// A weir.v1 CheckRequest is decoded straight from its wire form into the
// limiter's items, without the generated messages in between: protobuf's
// own decoding of a request of 16 items made a CheckItem, a map and a
// string per attribute name and value for each item, all thrown away once
// the items were built (a fifth of the limiter's CPU in 16-item requests).
// Here each item costs one string holding all its attribute bytes; its
// map, and the list of items, are reused from an earlier call (see
// checkRequest.reset). The decoding accepts and refuses exactly what proto.Unmarshal
// does for a CheckRequest (FuzzDecodeCheck compares them): fields in any
// order and repeated (the last scalar wins, each items field adds an
// item, a repeated map key keeps its last value), unknown fields and
// known fields of an unexpected wire type skipped, and strings that are
// not UTF-8 refused. One thing it refuses that proto.Unmarshal accepts: a
// request the limiter would refuse for its size, more than
// limiter.MaxItems items or an item of more than limiter.MaxAttributes
// attributes, is refused as soon as the count passes the bound, with
// limiter.ErrInvalid, before the rest is built: a request of a few
// megabytes of empty items would otherwise cost a limiter.Item each,
// hundreds of megabytes, for an answer known at the 257th.

// Field numbers of weir.v1 CheckRequest, CheckItem and its map entry.
const (
	fieldDomain       protowire.Number = 1
	fieldItems        protowire.Number = 2
	fieldAllOrNothing protowire.Number = 3
	fieldAttributes   protowire.Number = 1
	fieldHits         protowire.Number = 2
	fieldEntryKey     protowire.Number = 1
	fieldEntryValue   protowire.Number = 2
)

var errNotUTF8 = errors.New("string field contains invalid UTF-8")

// checkRequest is a decoded CheckRequest. One that is reset and decoded
// again reuses its list of items, the attribute maps of the first
// len(buf) items, and its domain when the new one is the same: the Check
// handler keeps its checkRequests in a pool.
type checkRequest struct {
	domain string
	items  []limiter.Item
	// allOrNothing is the request's all_or_nothing: limiter.Request's
	// RefundOnReject.
	allOrNothing bool
	buf          [16]limiter.Item // most requests fit: no allocation for the list
	// touched is how many of buf's items decode has filled, or begun to
	// fill, since the last reset: the ones reset empties.
	touched int
	last    string // the domain of an earlier decode, reused when repeated (ReuseString)
}

// decode parses b, the wire form of a CheckRequest, into r, which must be
// new or reset. On error r holds what was parsed before it. A request of
// more items, or an item of more attributes, than the limiter accepts is
// refused at the first one past the bound with an error wrapping
// limiter.ErrInvalid (an invalid request, not a malformed one); the items
// after it are not read, so that its cost is that of a request the
// limiter accepts.
func (r *checkRequest) decode(b []byte) error {
	r.items = r.buf[:0]
	var err error
	_, ferr := pbwire.Each(b, func(f pbwire.Field) bool {
		switch {
		case f.Num == fieldDomain && f.Type == protowire.BytesType:
			if !utf8.Valid(f.Bytes) {
				err = errNotUTF8
				return false
			}
			r.domain = ReuseString(&r.last, f.Bytes)
		case f.Num == fieldItems && f.Type == protowire.BytesType:
			if len(r.items) == limiter.MaxItems {
				err = fmt.Errorf("%w: more than %d items, want 1 to %d", limiter.ErrInvalid, limiter.MaxItems, limiter.MaxItems)
				return false
			}
			var reuse map[string]string
			if i := len(r.items); i < len(r.buf) {
				reuse, r.touched = r.buf[i].Attributes, i+1
			}
			var it limiter.Item
			if it, err = decodeItem(f.Bytes, reuse); err != nil {
				if errors.Is(err, limiter.ErrInvalid) {
					err = fmt.Errorf("item %d: %w", len(r.items), err)
				}
				return false
			}
			r.items = append(r.items, it)
		case f.Num == fieldAllOrNothing && f.Type == protowire.VarintType:
			r.allOrNothing = f.Varint != 0
		}
		return true
	})
	if ferr != nil {
		return ferr
	}
	return err
}

// request returns r as the limiter's request; its items are r's.
func (r *checkRequest) request() limiter.Request {
	return limiter.Request{Domain: r.domain, Items: r.items, RefundOnReject: r.allOrNothing}
}

// reset empties r for another decode, keeping the attribute maps of its
// first items, emptied, for their next use, except a map grown past what
// the limiter accepts (a refused request's, which decode stops at one
// past): a pooled request holds no more than len(buf) maps of
// limiter.MaxAttributes+1 entries.
func (r *checkRequest) reset() {
	// Only the items decode touched: the others were emptied by an
	// earlier reset (a single-item request would otherwise pay for
	// sixteen maps).
	for i := range r.buf[:r.touched] {
		m := r.buf[i].Attributes
		if len(m) > limiter.MaxAttributes {
			m = nil
		}
		clear(m)
		r.buf[i] = limiter.Item{Attributes: m}
	}
	r.domain, r.items, r.allOrNothing, r.touched = "", nil, false, 0
}

// decodeItem parses a CheckItem, into reuse if it is a map (empty), or
// else into a new one. Its attribute names and values are cut from one
// string, a copy of the item's bytes, which a retained name or value
// therefore keeps alive: at most one item. An item of more than
// limiter.MaxAttributes distinct names is refused, with
// limiter.ErrInvalid, at the first name past the bound (entries that
// repeat a name replace its value, as in proto.Unmarshal, and do not
// count).
func decodeItem(b []byte, reuse map[string]string) (limiter.Item, error) {
	var it limiter.Item
	// A first pass checks the framing and counts the entries, to size the
	// map; the second reads them.
	entries := 0
	if _, err := pbwire.Each(b, func(f pbwire.Field) bool {
		if f.Num == fieldAttributes && f.Type == protowire.BytesType {
			entries++
		}
		return true
	}); err != nil {
		return it, err
	}
	var s string
	switch {
	case entries == 0:
	case reuse != nil:
		it.Attributes, s = reuse, string(b)
	default:
		// Sized by the entries, but not past what the limiter accepts:
		// entries may repeat one name (the last wins), and a request of a
		// few megabytes of empty entries must not size a map of millions.
		it.Attributes, s = make(map[string]string, min(entries, limiter.MaxAttributes+1)), string(b)
	}
	var err error
	_, _ = pbwire.Each(b, func(f pbwire.Field) bool {
		switch {
		case f.Num == fieldAttributes && f.Type == protowire.BytesType:
			var k, v string
			if k, v, err = decodeEntry(f.Bytes, f.In(s)); err != nil {
				return false
			}
			if it.Attributes[k] = v; len(it.Attributes) > limiter.MaxAttributes {
				err = fmt.Errorf("%w: more than %d attributes", limiter.ErrInvalid, limiter.MaxAttributes)
				return false
			}
		case f.Num == fieldHits && f.Type == protowire.VarintType:
			it.Hits = int64(f.Varint)
		}
		return true
	})
	return it, err
}

// decodeEntry parses a map entry, b, whose bytes are also s: the key and
// value are cut from s. A missing key or value is "".
func decodeEntry(b []byte, s string) (key, value string, err error) {
	_, ferr := pbwire.Each(b, func(f pbwire.Field) bool {
		if (f.Num != fieldEntryKey && f.Num != fieldEntryValue) || f.Type != protowire.BytesType {
			return true
		}
		if !utf8.Valid(f.Bytes) {
			err = errNotUTF8
			return false
		}
		if f.Num == fieldEntryKey {
			key = f.In(s)
		} else {
			value = f.In(s)
		}
		return true
	})
	if ferr != nil {
		return "", "", ferr
	}
	return key, value, err
}

// checkDecoder is the WireMessage the Check handler decodes into. What
// reads the decoded request as a message instead (a stats handler's
// InPayload, grpc-go's request tracing) sees an empty CheckRequest: the
// request is in req; binary logging records the bytes.
type checkDecoder struct {
	WireMessage
	empty weirv1.CheckRequest
	req   checkRequest
}

// newCheckDecoder returns an empty checkDecoder, for Service.decoders.
func newCheckDecoder() any {
	d := &checkDecoder{}
	d.Init(&d.empty, &d.req)
	return d
}

// putDecoder resets d, done with, and pools it.
func (s *Service) putDecoder(d *checkDecoder) {
	d.req.reset()
	s.decoders.Put(d)
}

// ParseWire implements WireParser.
func (r *checkRequest) ParseWire(b []byte, _ int) error { return r.decode(b) }

// CheckWire answers a weir.v1 Check given and answered in wire form, as
// the server Register sets up does: the request decoded straight into
// limiter items, the answer encoded from the limiter's response. A request
// that does not decode, or has more items or attributes than the limiter
// accepts, gets codes.InvalidArgument, as from Decode; the other errors
// are Check's.
func (s *Service) CheckWire(ctx context.Context, req []byte) ([]byte, error) {
	d := s.decoders.Get().(*checkDecoder)
	defer s.putDecoder(d)
	r := &d.req
	if err := r.decode(req); err != nil {
		return nil, parseStatus(err)
	}
	resp, err := s.check(ctx, r.request())
	if err != nil {
		return nil, err
	}
	return newCheckEncoder(resp).append(nil), nil
}

// checkHandler serves Check. Without an interceptor it decodes the
// request with checkRequest and encodes the answer with checkEncoder;
// with one (which is handed the request and the answer), it is the
// generated handler.
func checkHandler(generated grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		if ic != nil {
			return generated(srv, ctx, dec, ic)
		}
		s := srv.(*Service)
		d := s.decoders.Get().(*checkDecoder)
		// Nothing holds the request once Check returns: the response
		// refers to no item, and its strings are the items' own.
		defer s.putDecoder(d)
		if err := Decode(dec, &d.WireMessage); err != nil {
			return nil, err
		}
		resp, err := s.check(ctx, d.req.request())
		if err != nil {
			return nil, err
		}
		return newCheckEncoder(resp), nil
	}
}
