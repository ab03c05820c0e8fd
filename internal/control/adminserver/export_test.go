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
