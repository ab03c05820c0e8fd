// Package coordinator is Weir's central control plane for global quotas
// (SPEC §4): coordinators campaign for leadership in etcd; the leader
// consumes the limiters' usage reports from Kafka, estimates each DC's
// demand, computes max-min fair shares, and writes them to etcd through a
// two-phase protocol — a DC grows only into quota the others have
// acknowledged releasing — with every write fenced by its leadership, so
// that a deposed leader cannot overwrite its successor.
//
// The pure core is package planner; Coordinator adds the I/O: the
// election, the Kafka consumer, the etcd reads, watches and writes.
// docs/architecture.md explains the protocol and its safety argument.
//
// One goroutine owns the planner: the leader's loop (lead). The usage
// consumer decodes reports and hands them to it over a bounded channel;
// the admin views are requests the loop answers between its steps. No lock
// is held across etcd I/O, and report intake never waits on etcd.
package coordinator
