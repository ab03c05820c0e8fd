package adminserver

import "time"

// SetPeerClock makes p read the time from now, for the tests of how often
// it logs a refusal.
func SetPeerClock(p *PeerURLs, now func() time.Time) { p.now = now }
