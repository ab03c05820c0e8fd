// Package memstore keeps rate-limit states in process memory. It serves
// tests, single-node deployments without Redis, and the limiter's degraded
// mode when Redis is unreachable (failure_mode "local").
//
// The store is sharded by key hash; each shard is a map under its own mutex.
// It holds at most Config.MaxKeys keys. Keys whose state has become
// equivalent to a fresh one (their expiry, see algorithm.Expiry) start afresh
// when touched, and are dropped when a shard is full, by a sweep of that shard (at most
// one per second of request time per shard). When a full shard has nothing
// expired, the store evicts, among a few keys sampled from that shard, the
// one that expires soonest — the key whose loss forgets the least quota.
package memstore
