package planner

import "time"

// SetAck records that, as of now, every instance of dc has applied its
// assignments up to etcd revision rev: the caller passes the least revision
// applied by the DC's live instances and by those lost too recently for
// their shares to have run out. A DC with no such instance has
// acknowledged nothing: pass 0, so that whatever it was sent and has not
// released still counts as held (docs/architecture.md, "Safety").
// Passing math.MaxInt64 for it would let the other DCs grow into the quota
// of a DC that is cut off and still enforces its old shares.
func (p *Planner) SetAck(dc string, rev int64, now time.Time) {
	d, ok := p.dcIndex[dc]
	if !ok {
		return
	}
	ds := &p.dc[d]
	ds.ack = rev
	if n := len(ds.acks); n == 0 || ds.acks[n-1].rev != rev {
		ds.acks = append(ds.acks, ackSample{rev, now})
	}
	// Keep the samples of the longest quarantine, and the one in force
	// before it.
	horizon := now.Add(-p.cfg.MaxQuarantine)
	i := 0
	for j := range ds.acks {
		if !ds.acks[j].at.After(horizon) {
			i = j
		}
	}
	if i > 0 {
		ds.acks = append(ds.acks[:0], ds.acks[i:]...)
	}
}

// ackSince returns the revision DC d has had applied throughout the last
// wait: its acknowledgement in force wait ago, or a lower one since.
func (p *Planner) ackSince(d int, wait time.Duration) int64 {
	ds := &p.dc[d]
	if wait <= 0 {
		return ds.ack
	}
	horizon := p.now.Add(-wait)
	ack := int64(0)
	for _, a := range ds.acks {
		if !a.at.After(horizon) {
			ack = a.rev
		} else {
			ack = min(ack, a.rev)
		}
	}
	return ack
}

type ackSample struct {
	rev int64
	at  time.Time
}
