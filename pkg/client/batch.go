package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/pkg/limiter"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// errAlone tells a caller whose batch failed for its content (refused as
// invalid, or not encodable) to send its items on their own: one bad item
// must not fail the others' checks.
var errAlone = errors.New("client: batch refused; send alone")

// batcher gathers the Checks of each domain that arrive within the linger
// into one RPC. A batch is sent when its linger ends (by its timer) or
// when it is full (on a goroutine the caller that filled it starts, so
// that this caller too waits only as long as its own context lets it).
// The batcher owns these sends: each is counted in inflight, which close
// waits for after cancelling the client's base context, which ends them.
type batcher struct {
	c *Client

	mu       sync.Mutex
	open     map[string]*batch // by domain: the batch taking items
	closed   bool
	inflight sync.WaitGroup
}

// maxRequestBytes bounds the encoded size of a batch's request: the
// limiter refuses larger ones (grpc.MaxRecvMsgSize in internal/dc/limiterd,
// gRPC's default too) as ResourceExhausted, which would fail every caller
// of a batch whose items each fit.
const maxRequestBytes = 4 << 20

// batch is one RPC's worth of items. results, err and alone are written
// once, before done is closed.
type batch struct {
	domain  string
	items   []*weirv1.CheckItem
	size    int // encoded size of the request
	callers int
	timer   *time.Timer
	done    chan struct{}
	results []*weirv1.ItemResult
	err     error
	// alone is set when err is about the items and no quota was spent:
	// the limiter refused the request as invalid (for any reason but its
	// domain, which all callers share), or it could not be encoded and
	// was never sent.
	alone bool
}

func newBatcher(c *Client) *batcher {
	return &batcher{c: c, open: make(map[string]*batch)}
}

// check adds items, at most MaxBatch, to the open batch of domain and
// waits for their results. A batch is sent before it would pass MaxBatch
// items or maxRequestBytes; items larger than that on their own are not
// batched (errAlone).
func (b *batcher) check(ctx context.Context, domain string, items []*weirv1.CheckItem) ([]*weirv1.ItemResult, error) {
	limit := b.c.cfg.MaxBatch
	size := 0
	for _, it := range items {
		size += 1 + protowire.SizeBytes(proto.Size(it)) // field 2 of CheckRequest
	}
	if 1+protowire.SizeBytes(len(domain))+size > maxRequestBytes {
		// Too large for any batch: on their own, these items get their
		// own answer.
		return nil, errAlone
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	bt := b.open[domain]
	var previous *batch
	if bt != nil && (len(bt.items)+len(items) > limit || bt.size+size > maxRequestBytes) {
		// No room: the open batch goes now, and these items start the
		// next.
		b.take(bt)
		previous, bt = bt, nil
	}
	if bt == nil {
		bt = &batch{domain: domain, items: make([]*weirv1.CheckItem, 0, min(limit, 32)), done: make(chan struct{})}
		bt.size = 1 + protowire.SizeBytes(len(domain))
		b.open[domain] = bt
		bt.timer = time.AfterFunc(b.c.cfg.Linger, func() { b.expire(bt) })
	}
	off := len(bt.items)
	bt.items = append(bt.items, items...)
	bt.size += size
	bt.callers++
	full := len(bt.items) == limit
	if full {
		b.take(bt)
	}
	b.mu.Unlock()
	// Both sends are counted in inflight by take.
	if previous != nil {
		go b.flush(previous)
	}
	if full {
		go b.flush(bt)
	}
	select {
	case <-bt.done:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if bt.err != nil {
		if bt.callers > 1 && bt.alone {
			return nil, errAlone
		}
		return nil, bt.err
	}
	return bt.results[off : off+len(items)], nil
}

// take removes bt from the open batches to be sent, counting the send in
// inflight. b.mu must be held.
func (b *batcher) take(bt *batch) {
	delete(b.open, bt.domain)
	bt.timer.Stop()
	b.inflight.Add(1)
}

// expire sends bt at the end of its linger, unless it was sent already.
func (b *batcher) expire(bt *batch) {
	b.mu.Lock()
	if b.open[bt.domain] != bt {
		b.mu.Unlock()
		return
	}
	b.take(bt)
	b.mu.Unlock()
	b.flush(bt)
}

// flush sends bt and hands its callers the answer. It runs whatever the
// callers' contexts (their items are in the request, and those still
// waiting need the answer), until the client closes.
func (b *batcher) flush(bt *batch) {
	defer b.inflight.Done()
	req := &weirv1.CheckRequest{Domain: bt.domain, Items: bt.items}
	bt.results, bt.err = b.c.rpc(b.c.base, req)
	switch {
	case bt.err == nil:
	case b.c.base.Err() != nil:
		bt.err = ErrClosed
	case status.Code(bt.err) == codes.InvalidArgument:
		bt.alone = !errors.Is(remoteError(bt.err), limiter.ErrUnknownDomain)
	case status.Code(bt.err) == codes.Internal:
		// gRPC reports a request it could not encode as Internal, and
		// sends nothing. protoItems refuses what protobuf cannot encode,
		// so this should not happen; should it, the callers must not all
		// fail for one item. Encoding again tells this failure from an
		// Internal the limiter answered (after it may have spent quota,
		// when resending would spend it twice).
		_, merr := proto.Marshal(req)
		bt.alone = merr != nil
	}
	close(bt.done)
}

// close fails the open batches with ErrClosed and waits for those in
// flight.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	open := b.open
	b.open = nil
	for _, bt := range open {
		bt.timer.Stop()
	}
	b.mu.Unlock()
	for _, bt := range open {
		// A timer that fired already finds bt gone from open and returns.
		bt.err = ErrClosed
		close(bt.done)
	}
	b.inflight.Wait()
}
