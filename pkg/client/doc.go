// Package client is a Go client of a Weir limiter over its gRPC API,
// weir.v1.Limiter, for the services that ask Weir for decisions. A service
// creates one Client at start, shares it between goroutines and closes it
// on shutdown.
//
// The client keeps one gRPC channel to the limiters: calls go round-robin
// over a list of addresses or over every address a DNS name resolves to,
// idle connections are pinged, and a limiter that went away is re-dialled
// with a short backoff. Each Check has a deadline (Config.Timeout, 50 ms
// by default) well under the service's own.
//
// With Config.Linger set, concurrent Checks batch: those that arrive
// within the linger share one weir.v1 Check of several items (split at
// the server's limit of items per call), and each caller gets its own
// items' results. A busy service then pays one round trip for many
// decisions, at the price of up to Linger of added latency. A Check with
// limiter.Request.RefundOnReject (weir.v1's all_or_nothing) never
// batches: its items are given back together, and go in one call of
// their own.
//
// When the limiter cannot decide — unreachable, too slow, or answering
// Unavailable — a Check takes its failure Policy: allow, reject, decide
// locally with an in-process limiter.Limiter at conservative limits, or
// return the error. Each call site can have its own (Client.Site). Every
// fallback is counted in Stats and in the Prometheus collector the caller
// may register (Client.Collector).
//
// Client and Site implement httplimit.Checker, so pkg/httplimit's
// middleware, and pkg/grpclimit's interceptors, work over the network as
// they do with an in-process limiter.
package client
