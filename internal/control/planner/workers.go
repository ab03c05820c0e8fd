package planner

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// workers returns how many goroutines a round of n rules runs on, at
// least one: spreadRules's w is below it, so scratch sized by it serves
// every goroutine.
func (p *Planner) workers(n int) int { return max(1, min(p.cfg.Workers, n)) }

// spreadRules calls f for every rule of rss (i is its index in rss), on up
// to cfg.Workers goroutines that have ended when it returns; w, in [0,
// workers), tells f which goroutine's scratch to use. The rules of a round
// are independent: f may change only rss[i] and what belongs to it, and
// read the planner's own state, which nothing changes meanwhile.
func (p *Planner) spreadRules(rss []*ruleState, f func(w, i int)) {
	workers := p.workers(len(rss))
	if workers == 1 {
		for i := range rss {
			f(0, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(rss) {
					return
				}
				f(w, i)
			}
		})
	}
	wg.Wait()
}

// ruleStates returns the rules, sorted by domain and id.
func (p *Planner) ruleStates() []*ruleState {
	rss := make([]*ruleState, 0, len(p.rules))
	for _, rs := range p.rules {
		rss = append(rss, rs)
	}
	slices.SortFunc(rss, func(a, b *ruleState) int {
		return cmp.Or(strings.Compare(a.ref.domain, b.ref.domain), strings.Compare(a.ref.id, b.ref.id))
	})
	return rss
}
