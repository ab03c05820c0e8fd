// Package planner is the coordinator's pure planning state machine for
// global quotas (docs/architecture.md): it turns the limiters' usage
// reports into demand estimates, the estimates into target shares, and the
// targets into the two-phase schedule of assignment writes that keeps the
// shares any DC may enforce summing to at most 1.
//
// It does no I/O and reads no clock. Its owner (the coordinator's leader
// loop) passes the time to every call, feeds it decoded reports (Ingest),
// the DCs' acknowledgements (SetAck) and the outcome of every write it was
// asked for (Written, LeaseWritten), and performs those writes itself.
// A round is Tick, then Plan, Written for each batch, and Settle; Leases
// after it. A new leader calls SetRules, Load, then Tick.
//
// The files follow the round:
//
//   - intake.go: reports checked, deduplicated per (instance, sequence)
//     and summed per interval; late reports gathered apart.
//   - intervals.go: intervals closed into the estimates; blind intervals
//     (no DC heard) hold them, lost reports are skipped, late ones stand in.
//   - rules.go and targets.go: the rules planned, and the pass of Tick over
//     every entry: its intervals closed, then its shares' targets from the
//     estimates and the operators' policies.
//   - acks.go and grants.go: the safety core — acknowledgements, what each
//     DC may still hold, shrinks at once and grows only into quota no other
//     DC may hold.
//   - leases.go: lease renewal and expiry.
//   - takeover.go: a new leader starting from what etcd holds.
//   - views.go and usagestats.go: what operators read (the admin API).
//   - workers.go: a round's rules spread over Config.Workers goroutines,
//     which Tick and Plan start and wait for; a rule is one goroutine's
//     work, and the result does not depend on how many there are.
//
// A Planner is NOT safe for concurrent use, and that includes its views:
// Snapshot, Keys and RuleStats prune acknowledged history as they compute.
// It has one owner, which serialises every call.
package planner
