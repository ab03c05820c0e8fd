// Package multidc holds the end-to-end test of global quotas: three DCs in
// one process — a limiter each with its own redis-server, an embedded etcd,
// an in-process Kafka-protocol broker and two coordinators — checked
// against SPEC §7's accuracy and safety goals (docs/architecture.md).
package multidc
