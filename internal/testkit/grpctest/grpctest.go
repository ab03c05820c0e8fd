// Package grpctest holds what tests of Weir's gRPC services share.
package grpctest

import (
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc/mem"
)

// RawCodec sends and receives []byte as they are, under the name "proto",
// so that a server decodes them with its protobuf codec: the way to send a
// service bytes that are not a valid message. Use it with
// grpc.ForceCodecV2(grpctest.RawCodec{}); requests and replies are []byte
// and *[]byte.
type RawCodec struct{}

// Marshal returns v, a []byte, as it is.
func (RawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

// Unmarshal stores the bytes received in v, a *[]byte.
func (RawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// Name is "proto", the name of the codec the server uses.
func (RawCodec) Name() string { return "proto" }

// Callers runs callers goroutines at once, each making calls calls of
// call(g, n) (caller g's call n) in turn until one fails, and reports
// each caller's failure, naming the caller and the call, when all are
// done.
func Callers(t testing.TB, callers, calls int, call func(g, n int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for g := range callers {
		wg.Go(func() {
			for n := range calls {
				if err := call(g, n); err != nil {
					errs[g] = fmt.Errorf("caller %d call %d: %w", g, n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
