package limiter

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/breaker"
)

// NodeLocator is implemented by stores spread over nodes that fail apart,
// as redisstore.Store is on Redis Cluster (coalesce.Coalescer passes it
// through): Node names the node that decides r, from what the store
// already knows (no round trip). The limiter then keeps a circuit breaker
// and an adaptive store timeout per node, so that a dead node sends only
// its own keys to their rules' failure modes. A store that cannot say
// returns "" (one node for the whole store); an error counts r on the node
// "" too. Without a NodeLocator, the store is one node, "".
type NodeLocator interface {
	Node(ctx context.Context, r algorithm.Request) (string, error)
}

// NodeObserver is an Observer that is told which node of the store (see
// NodeLocator) each circuit breaker belongs to. The limiter calls
// NodeBreakerState instead of Observer.BreakerState when its Observer
// implements it, and NodeForgotten when it forgets a node that no request
// was routed to for a while (after a failover, the dead primary): its
// series can go.
type NodeObserver interface {
	NodeBreakerState(node string, s breaker.State)
	NodeForgotten(node string)
}

// Limits on the nodes the limiter keeps state for.
const (
	// maxNodes bounds the nodes kept: a Redis Cluster has at most a few
	// hundred primaries. Past it, the least recently used is forgotten.
	maxNodes = 1024
	// nodeIdle is how long a node no request was routed to is kept.
	nodeIdle = time.Minute
)

// node is the limiter's state for one node of the store.
type node struct {
	name    string
	breaker *breaker.Breaker
	timeout *adaptiveTimeout
	used    atomic.Int64 // Unix ns of the last request routed to it
}

// nodes holds a node per name, created on first use. Safe for concurrent
// use; a lookup of a known node takes a read lock.
type nodes struct {
	newNode func(name string) *node
	created func(*node)       // told of a node just created, outside the lock
	forgot  func(name string) // told of a node forgotten, outside the lock

	mu        sync.RWMutex
	byName    map[string]*node
	lastSweep atomic.Int64 // Unix ns
}

func newNodes(newNode func(string) *node, created func(*node), forgot func(string)) *nodes {
	return &nodes{newNode: newNode, created: created, forgot: forgot, byName: map[string]*node{}}
}

// get returns the node named name, creating it if need be, and marks it
// used at now (Unix ns). Now and then it forgets the nodes idle for
// nodeIdle.
func (ns *nodes) get(name string, now int64) *node {
	ns.mu.RLock()
	n := ns.byName[name]
	ns.mu.RUnlock()
	if n == nil {
		n = ns.add(name, now)
	}
	if n.used.Load() < now {
		n.used.Store(now)
	}
	if last := ns.lastSweep.Load(); now-last >= int64(nodeIdle/2) && ns.lastSweep.CompareAndSwap(last, now) {
		ns.sweep(now, name)
	}
	return n
}

func (ns *nodes) add(name string, now int64) *node {
	ns.mu.Lock()
	n := ns.byName[name]
	var evicted string
	fresh := n == nil
	if fresh {
		if len(ns.byName) >= maxNodes {
			var lru *node
			for _, x := range ns.byName {
				if lru == nil || x.used.Load() < lru.used.Load() {
					lru = x
				}
			}
			delete(ns.byName, lru.name)
			evicted = lru.name
		}
		n = ns.newNode(name)
		n.used.Store(now)
		ns.byName[name] = n
	}
	ns.mu.Unlock()
	if evicted != "" {
		ns.forgot(evicted)
	}
	if fresh {
		ns.created(n)
	}
	return n
}

// sweep forgets the nodes idle for nodeIdle at now, but keep.
func (ns *nodes) sweep(now int64, keep string) {
	var gone []string
	ns.mu.Lock()
	for name, n := range ns.byName {
		if name != keep && now-n.used.Load() >= int64(nodeIdle) {
			delete(ns.byName, name)
			gone = append(gone, name)
		}
	}
	ns.mu.Unlock()
	for _, name := range gone {
		ns.forgot(name)
	}
}

// each calls fn for every node kept.
func (ns *nodes) each(fn func(*node)) {
	ns.mu.RLock()
	defer ns.mu.RUnlock()
	for _, n := range ns.byName {
		fn(n)
	}
}

// States returns the state of each node's circuit breaker, by node ("" for
// a store that names no nodes; see NodeLocator). Nodes no request was
// routed to for a minute are forgotten.
func (l *Limiter) States() map[string]breaker.State {
	out := map[string]breaker.State{}
	l.nodes.each(func(n *node) { out[n.name] = n.breaker.State() })
	return out
}

// route is the nodes of one store call: the distinct nodes of its
// requests, and which of them each request is on.
type route struct {
	at   []int // index in hops of each request's node; nil: all on hops[0]
	hops []hop
}

// hop is one node of a store call and what became of its requests.
type hop struct {
	n        *node
	reqs     int  // requests of the call on n
	ok       bool // the node's breaker lets the hop's requests through
	failed   int
	firstErr error
	// The store call that carried the hop's requests: when it was sent
	// and answered, and its bound.
	callStart, callEnd time.Time
	bound              time.Duration
}

// hopOf returns the hop of request i.
func (rt *route) hopOf(i int) *hop {
	if rt.at == nil {
		return &rt.hops[0]
	}
	return &rt.hops[rt.at[i]]
}

// route finds the node of each of reqs at now: it returns the hops, in
// hops (the caller's empty buffer, so that a call on one node allocates
// nothing), and the index in them of each request's node (nil:
// all on the first). It returns them rather than filling a route through
// a pointer, which would move the caller's buffer to the heap.
func (l *Limiter) route(ctx context.Context, now time.Time, reqs []algorithm.Request, hops []hop) ([]hop, []int) {
	if l.locator == nil {
		return append(hops, hop{n: l.single, reqs: len(reqs)}), nil
	}
	var at []int // made when a second node appears
	for i, r := range reqs {
		name, err := l.locator.Node(ctx, r)
		if err != nil {
			name = ""
		}
		h := -1
		for j := range hops {
			if hops[j].n.name == name {
				h = j
				break
			}
		}
		if h < 0 {
			h = len(hops)
			hops = append(hops, hop{n: l.nodes.get(name, now.UnixNano())})
			if h > 0 && at == nil {
				at = make([]int, len(reqs)) // the requests before i are all on the first
			}
		}
		hops[h].reqs++
		if at != nil {
			at[i] = h
		}
	}
	return hops, at
}

// newNode returns the state of a node first met.
func (l *Limiter) newNode(name string) *node {
	bcfg := l.cfg.Breaker
	if bcfg.Now == nil {
		bcfg.Now = l.now
	}
	b, _ := breaker.New(bcfg, func(s breaker.State) { // bcfg was validated by New
		l.log.Warn("store circuit breaker changed state", "node", name, "state", s.String())
		if l.nodeObs != nil {
			l.nodeObs.NodeBreakerState(name, s)
		} else {
			l.obs.BreakerState(s)
		}
	})
	return &node{name: name, breaker: b, timeout: newAdaptiveTimeout(l.cfg.StoreTimeout, l.cfg.StoreTimeoutMax, l.cfg.StorePause)}
}

// nodeCreated tells the observer of a node first met, its breaker closed,
// so that its series exist before anything happens to it.
func (l *Limiter) nodeCreated(n *node) {
	if l.nodeObs != nil {
		l.nodeObs.NodeBreakerState(n.name, breaker.Closed)
	}
}

// forgetNode tells the observer that a node is forgotten.
func (l *Limiter) forgetNode(name string) {
	if l.nodeObs != nil {
		l.nodeObs.NodeForgotten(name)
	}
}

// probe probes the breaker of n, the node of hop h of rt, in the
// background: with a Ping when n is the store's only node ("") and the
// store is a Pinger, otherwise by reading the state of the first of reqs
// on n (cost 0: nothing consumed), which reaches that node and no other.
func (l *Limiter) probe(ctx context.Context, now time.Time, n *node, reqs []algorithm.Request, rt *route, h int) {
	var probe func(context.Context) error
	if n.name == "" && l.pinger != nil {
		probe = l.pinger.Ping
	} else {
		req := reqs[0]
		for i := range reqs {
			if rt.at == nil || rt.at[i] == h {
				req = reqs[i]
				break
			}
		}
		req.Cost = 0
		probe = func(ctx context.Context) error {
			var res []algorithm.Result
			var err error
			if l.onNode != nil {
				// In n's own queue: a probe of a dead node holds up no other.
				res, err = l.onNode.DecideOn(ctx, n.name, 0, now, []algorithm.Request{req})
			} else {
				res, err = l.store.Decide(ctx, now, []algorithm.Request{req})
			}
			if err == nil {
				err = res[0].Err
			}
			return err
		}
	}
	l.probes.Add(1)
	bound := n.timeout.bound()
	go func() {
		defer l.probes.Done()
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
		defer cancel()
		if err := probe(pctx); err != nil {
			n.breaker.Failure()
			return
		}
		n.breaker.Success()
	}()
}
