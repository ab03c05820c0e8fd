// Package deadpeer gives tests a peer that does not answer: a loopback TCP
// address that takes each connection and closes it at once, without a byte.
//
// It replaces the habit of listening on port 0, closing the listener and
// using its address as "nothing listens here". Between the close and the
// test's dial, another test process on the machine may take that port (the
// kernel hands ephemeral ports out again), and the test then talks to a
// stranger: an adminserver test got a 404 from another package's server
// instead of the 502 it expected. A deadpeer holds its port for the whole
// test, so no one else can.
package deadpeer

import (
	"net"
	"sync"
	"testing"
)

// Addr returns a loopback host:port that accepts connections and closes
// them unread, until t ends. A client sees the connection reset or closed
// before any answer: an HTTP client gets an error (never a status), a gRPC
// client sees the server unavailable.
func Addr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("deadpeer: listening on loopback: %v", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by the cleanup below
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// URL is Addr as an http:// base URL.
func URL(t testing.TB) string {
	t.Helper()
	return "http://" + Addr(t)
}
