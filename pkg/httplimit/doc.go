// Package httplimit puts Weir in front of an http.Handler: each request is
// described by attributes (client IP, path, method, host, and headers the
// caller names), checked, and either passed on with the rate-limit header
// fields set or answered 429 Too Many Requests with Retry-After, the
// X-RateLimit-* and IETF RateLimit-Policy / RateLimit fields and a JSON
// body. The limiter's reverse-proxy mode is this middleware in front of
// net/http/httputil.ReverseProxy; Go services embed it directly.
//
// The header fields are written by SetHeaders, which the limiter's HTTP
// JSON API uses too, so both answer alike.
package httplimit
