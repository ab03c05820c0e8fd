// Package redisstore keeps rate-limit states in Redis. Every decision is one
// atomic Lua script run by EVALSHA (loaded again on NOSCRIPT), so many
// limiter instances can share one Redis; a batch of decisions is one round
// trip. On one node (a *redis.Client) a batch runs in batch scripts, up to
// 32 decisions a script call, each decision its algorithm's script in
// turn: one EVALSHA for many decisions, where Redis Cluster needs one for
// each (the keys of one script call would have to share a slot).
//
// The caller's clock, not Redis's, is the time: each call passes now, so
// tests run the same vectors with a fake clock against Redis and against
// package memstore. Every key is "<prefix>:{<key>}:<algorithm tag>", one
// Redis key per (rule, key) pair, whose braces form a Redis Cluster hash
// tag; every key carries a TTL, refreshed on each write, after which its
// state would be as good as fresh (for the window counters, plus a spread:
// how long into the window the write came, modulo an hour).
//
// The store works with anything that runs scripts and pipelines:
// *redis.Client, *redis.ClusterClient, *redis.Ring. On Redis Cluster a
// batch is one pipeline per node, sent at once; a node without the script
// gets it by EVAL; a failed request makes the client reload its slot map,
// so a promoted replica is found as soon as the cluster has promoted it.
// A request Redis did not decide has an error wrapping a *NodeError that
// names the node, and Store.Node names a request's node before the call:
// what a caller needs to keep one circuit breaker per node.
package redisstore
