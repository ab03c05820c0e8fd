// Package grpclimit puts Weir in front of a gRPC server: unary and stream
// server interceptors describe each call by attributes — the full method
// as "path" (so rules select services and methods with path_pattern, as
// "/pkg.Service/**"), the peer's IP as "ip", and the metadata keys the
// caller names — check it, and either let it through or answer
// RESOURCE_EXHAUSTED with the retry delay in the status details
// (google.rpc.RetryInfo, with a google.rpc.QuotaFailure naming the rule)
// and the rate-limit fields in the trailing metadata, as pkg/httplimit
// writes them into HTTP headers (x-ratelimit-limit, x-ratelimit-remaining,
// x-ratelimit-reset, ratelimit-policy, ratelimit, and retry-after on
// rejections).
//
// The checker is an in-process limiter.Limiter or a client of a remote
// limiter (pkg/client).
package grpclimit
