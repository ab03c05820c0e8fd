// Package limiter makes Weir's decisions: it matches a request's attributes
// against the rules in force, asks the DC's store about every matching rule
// in one round trip, and answers with the most constraining result.
//
// Around the store it keeps three safety nets. A hot-key cache (Ristretto)
// remembers keys that are out of quota until they can pass again, so a key
// hammered past its limit costs no store call. A circuit breaker stops
// calling a store that keeps failing; while it is open, and for every
// request whose store call fails, each rule's failure_mode applies: open
// (allow), closed (reject) or local (decide in memory at the DC's share
// divided by the DC's live limiter instances). And a request that one rule
// rejects gives back what the other rules took.
//
// The limiter reads no clock of its own beyond Config.Now and starts no
// goroutine that outlives a call except breaker probes, which Close waits
// for.
package limiter
