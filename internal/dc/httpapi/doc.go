// Package httpapi serves the limiter's HTTP JSON API:
//
//	POST /v1/check                      decide a request (200 allowed, 429 rejected)
//	POST /shouldAllowRequest            seed 000's API: {"clientId"} -> {"allowed"}; ?domain= or "domain" names the rule set
//	GET  /v1/rate-limits/{rule}/{key}   remaining quota of a key, consuming nothing
//	GET  /healthz                       the process is up
//	GET  /readyz                        rules are loaded, the store answers, not shutting down
//	GET  /healthcheck                   envoyproxy/ratelimit's: /readyz's check
//	GET  /metrics                       Prometheus metrics
//
// Every body is size-limited and decoded strictly: unknown fields, wrong
// types, trailing data and oversized input get a 400 with a JSON error
// naming the problem. docs/api.md documents the API.
package httpapi
