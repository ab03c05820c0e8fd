package coordinator

import (
	"errors"

	"github.com/weirhq/weir/internal/control/planner"
)

// ErrNotLeader is returned by the live views of a coordinator that does not
// lead: only the leader hears the usage reports.
var ErrNotLeader = errors.New("coordinator: not the leader")

// views carries the admin API's questions to the leader's loop, the
// planner's one owner, which answers each between two of its steps.
type views struct {
	ask  chan func(*planner.Planner)
	done chan struct{} // closed when the term ends
}

// view runs f on the leader's planner, in the leader's loop, and returns
// once f has returned; ErrNotLeader when this coordinator does not lead or
// stops leading first. f must not keep p.
func (c *Coordinator) view(f func(p *planner.Planner)) error {
	c.mu.Lock()
	v := c.views
	c.mu.Unlock()
	if v == nil {
		return ErrNotLeader
	}
	answered := make(chan struct{})
	select {
	case v.ask <- func(p *planner.Planner) { defer close(answered); f(p) }:
	case <-v.done:
		return ErrNotLeader
	}
	<-answered // the loop runs f as soon as it takes it
	return nil
}
