// Package etcdquota connects a limiter instance to the coordinator through
// etcd (SPEC §4, §6): an Agent keeps a quota.Table up to date with the
// DC's assignments and lease, registers the instance, acknowledges what it
// applied, and counts the DC's live instances (limiter.Instances).
//
// # What an Agent does
//
// Run first registers the instance: it grants an etcd lease (Config.LeaseTTL,
// kept alive) and puts a weirv1.InstanceRecord at
// etcdlayout.Layout.Instance(dc, instance) under it, with applied_revision
// 0. Only then does it list the DC's documents
// (etcdlayout.Layout.DCQuotas(dc), in pages, all at the revision of the
// first page) into the Table (quota.Table.Reset), and watch them from the
// next revision, with progress notifications and requiring a leader, into
// the Table (quota.Table.Apply) — the loop of package listwatch. Registering first means that the
// coordinator never takes a listing made before the instance was visible as
// acknowledged: the record says 0 until the listing is in force.
//
// After every batch it applies, the Agent rewrites the record with
// quota.Table.Applied: applied_revision is the revision up to which every
// change of the DC's documents is in force in this instance — the listing's
// revision, then the highest ModRevision of the events applied or the
// revision of a progress notification, held below a corrupt document (see
// package quota) — and epoch the highest epoch applied. The writes are
// coalesced: at most one is in flight, the next one carries the latest
// value, and the watch never waits on them.
//
// When the watch ends — its revision compacted, cancelled by the server,
// or no leader — the Agent lists again and watches from the new listing;
// the Table keeps the lease's reception time and its acknowledgement
// bookkeeping across re-lists. Errors are retried with exponential backoff
// and jitter (Config.MinBackoff to Config.MaxBackoff). While etcd is
// unreachable the Table keeps the last documents, whose lease runs out on
// its own: the DC falls back to min(static, assigned) shares.
//
// When the etcd lease is lost (not renewed within its TTL, or revoked), the
// Agent registers again under a new lease, with backoff, writing the latest
// acknowledgement. When Run's context ends, the Agent stops its goroutines
// and revokes its lease (within Config.StopTimeout), which deletes the
// record at once.
//
// Live counts the records under etcdlayout.Layout.Instances()+dc+"/"
// every Config.CountInterval; it is at least 1, and keeps its last value
// while etcd cannot be read.
package etcdquota
