package adminserver

import (
	"time"

	"github.com/weirhq/weir/pkg/logthrottle"
)

// SetPeerClock makes p read the time from now, for the tests of how often
// it logs a refusal.
func SetPeerClock(p *PeerURLs, now func() time.Time) {
	p.refusals = logthrottle.NewKeyed(PeerWarnInterval, maxWarned, now)
}

// SetForwarderClock makes f read the time from now, for the tests of how
// often it logs a leader that did not answer.
func SetForwarderClock(f *Forwarder, now func() time.Time) {
	f.failed = logthrottle.NewKeyed(ForwardFailLogEvery, maxWarned, now)
}
