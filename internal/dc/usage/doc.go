// Package usage is the limiter's side of usage reporting (SPEC §4): it
// counts what the global rules decide and publishes it, every interval, as
// weir.v1.UsageReport messages for the coordinator, which turns the DCs'
// demand into shares.
//
// Two parts, joined by the Flusher interface:
//
//   - Aggregator is a limiter.Observer. It counts every decision of a
//     global rule, per rule, on the decision path: a lookup in an
//     immutable map and atomic adds, with no lock shared between rules and
//     no allocation in the steady state. For rules with key dimensions it
//     also finds the keys under pressure, under a per-rule mutex.
//     Flush hands over what was counted since the last Flush.
//   - Reporter owns the goroutines that flush the Aggregator at every
//     multiple of the interval (on an injected Clock), build the reports,
//     keep them in a bounded buffer and publish them through a Publisher
//     (internal/kafka/usagetopic over Kafka, wired by limiterd). The
//     decision path never waits on it.
//
// # What is counted
//
// Only rules of scope global, and only real decisions of the rule: those
// of the store, the hot-key cache, failure modes (local, open, closed) and
// deny overrides. Allow overrides and unlimited rules decide nothing and are
// not counted. Each decision adds its hits to exactly one of:
//
//   - rejected: the rule refused the hits. A shadow rule's refusals count
//     here although the request goes on, since they are demand the rule
//     would have turned away, and they took no quota;
//   - admitted: the rule allowed the hits and the request went through:
//     the quota the rule actually gave;
//   - neither, when the rule allowed the hits but another rule rejected the
//     request: the limiter gave the quota back (or none was taken), so the
//     hits are demand but not use.
//
// Offered, the demand, is the sum of the three: every hit asked of the
// rule, so RuleUsage.offered ≥ admitted + rejected, the difference being
// the third case. Counters are cumulative and Flush reports their
// increase, so a decision counted concurrently with a Flush lands in
// exactly one interval. A decision is counted once the Observer call for
// it returns; one that has begun before a Flush may land in the next
// interval.
//
// # Keys under pressure
//
// A key of a rule with key dimensions is under pressure when, in the
// interval,
//
//   - a decision on it from the store, the cache or failure_mode local was
//     a rejection or left less than a quarter of the local limit
//     (Remaining*4 < Limit) — deny overrides and failure modes open and
//     closed say nothing about demand against the limit and do not count;
//   - or it is a heavy hitter: its estimated hits exceed 1/K of the rule's
//     hits in the interval, by a Space-Saving sketch of K counters (package
//     topk) fed with every decision of the rule;
//   - or the coordinator gave it a share of its own (KeyShares).
//
// From the decision that reveals the pressure on, the key gets exact
// counts, kept in a per-rule map, and it keeps them while it stays under
// pressure and for three intervals after. A key found under pressure
// during an interval has its earlier hits of that interval estimated from
// the sketch (its guaranteed count, so never more than the truth) and
// counted as admitted: had one of them been rejected or close to the limit,
// the key would have been tracked from it. A heavy hitter that was not
// tracked is reported with the sketch's estimate (which overcounts by at
// most the sketch's error bound, itself at most the rule's hits over K), as
// offered and admitted, and is tracked exactly from the next interval.
// Only if the key map was full (KeysDropped > 0) may such a key have had
// rejections, which its counts then miss and the rule's include.
// KeyUsage.limit is the key's global limit before shares: the rule's, or
// its override's.
//
// # Cost
//
// On the decision path (BenchmarkChecked, one core of this 2-core machine):
// about 5 ns for a response of local rules only, 12 ns per result of a
// global rule without key dimensions, and about 110 ns per result of a
// keyed global rule, of which about 75 ns is the sketch; no allocation.
// At 100,000 decisions a second that is about 1% of a core, so the sketch
// is fed every decision rather than a sample, and its guarantees hold
// exactly. A rule's mutex is held for well under a microsecond, so even
// one rule taking all the traffic sees little contention.
//
// # Bounds
//
// Memory is bounded whatever the keys: per rule with keyed traffic, a
// sketch of K counters (each holding at most the longest key it has seen,
// algorithm.MaxKeyLen bytes: 256 KiB for 64 counters at worst, a few KiB
// for usual keys) and at most MaxKeys exact keys; over all
// rules, the exact keys' bytes are bounded by MaxKeyBytes. A key that does
// not fit, is longer than algorithm.MaxKeyLen, or is not valid UTF-8
// (which a proto3 string cannot carry) is not reported, and KeysDropped
// estimates how many distinct keys were left out (linear counting over
// 8,192 bits: within about 4% up to 50,000 keys, saturating near 74,000). A
// rule's key state is freed after three intervals without keyed traffic;
// its counters, a few hundred bytes, stay for the Aggregator's lifetime
// (so that no decision can be counted into counters already let go).
//
// Reports larger than MaxMessageBytes marshalled are split into several
// messages, each with its own sequence. A rule whose keys do not fit one
// message is split into several RuleUsage entries, the first with the
// rule's counts and the others with zero counts and the rest of its keys,
// so that adding up the entries of a rule gives the right totals. At most
// BufferReports messages wait for Kafka; beyond that the oldest is dropped
// and counted in every later report's dropped_reports.
package usage
