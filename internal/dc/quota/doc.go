// Package quota keeps the shares of global rules that the coordinator
// assigns to this DC (SPEC §4) and answers, lock-free, which share of a
// rule's limit the DC enforces now. A Table implements limiter.Quotas;
// package quota/etcdquota fills it from etcd, registers the limiter
// instance and acknowledges what it applied.
//
// # Shares
//
// For a local rule the share is 1. For a global rule (domain, id):
//
//   - with a document (weirv1.RuleAssignment) in force: the share the
//     document gives the key, when it lists the key, else the rule's share;
//   - with no document: the rule's static share, rule.Rule.StaticShare
//     among Config.DCs.
//
// The DC's documents are in force only while its lease
// (weirv1.AssignmentLease) is: until min(ValidUntil on the coordinator's
// clock, reception + TTL on the Table's clock). Before any lease has been
// received, and once it has run out, every share of a rule with a document
// is min(static share, assigned share): the static shares of all DCs sum to
// at most 1, and a DC never enforces more than it was last assigned — the
// coordinator may have handed the rest to other DCs. Expiring early is
// always safe; expiring late is not, so validity is measured from when the
// Table applied the lease, and a lease listed again with the same revision
// (after a re-list) keeps its first reception time. ValidUntil is turned,
// on reception, into the time left until it on the wall clock; both limits
// then count down on the monotonic clock, so that Share reads only that
// (a wall-clock step after reception does not move them; TTL bounds the
// validity whatever the clocks do).
//
// # Corrupt and deleted documents
//
// A document that cannot be decoded or fails the checks of Change (share
// out of [0, 1] or NaN, a DC, domain or rule id other than its key's, a
// duplicate key, a key longer than MaxKeyLen, more than MaxKeys keys, a
// value larger than MaxDocumentSize) is logged, counted (Stats.Corrupt) and
// skipped. Its rule is then capped: it enforces min(static share, share of
// the last document applied), or 0 when no document of the rule was ever
// applied by this Table — a document exists, so the coordinator assigns
// the rule, and the static share is not known to be safe. The cap holds
// until a valid document arrives, lease or not.
//
// A skipped document is not in force, so the acknowledgement stops short of
// it: while a rule's latest document is corrupt, Applied reports at most
// the revision just before the first corrupt document of the rule. The
// coordinator, which waits for every instance of a DC to acknowledge a
// decrease before it grows another DC, then never counts on a decrease this
// instance could not read.
//
// A deleted document caps its rule in the same way, at min(static share,
// last assigned share), until a new document comes: the coordinator deletes
// a document only when it no longer assigns the rule, and the DC is then
// expected back at its static share; taking the minimum with the last
// assignment keeps it safe while other DCs may still hold more than their
// static shares. Deletions are acknowledged as usual. Capped entries are
// kept for the Table's lifetime (one small entry per rule ever assigned).
//
// # Before the first sync
//
// Until the first Reset (the first list of the DC's documents) no document
// is known and every global rule takes its static share; Synced and
// WaitSynced tell when the first list has been applied. A limiter should
// wait for it (within reason) before serving global rules: a DC whose
// assignment is below its static share is only held to it once the
// document is known.
//
// # Concurrency
//
// Share, HasKeyShare, Applied, Synced and Stats are safe for concurrent
// use and take no lock: the state is an immutable snapshot swapped
// atomically by Reset and Apply, which are serialised with each other.
// Share and HasKeyShare do not allocate.
//
// The package imports only the standard library and Weir's rule packages;
// decoding the documents and talking to etcd is etcdquota's job.
package quota
