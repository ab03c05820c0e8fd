// Package coalesce merges concurrent store calls into shared ones: while a
// few calls are in flight, the requests that arrive wait in a queue and the
// next free worker sends all of them in one call, which for Redis is one
// pipelined round trip. Under load this trades a syscall pair per decision
// for one per batch; when idle, a call goes out at once, adding no delay.
//
// A merged call decides every request at the latest now among the calls it
// merges (they arrived within one round trip of each other). Refunds are
// passed straight through.
//
// With Config.Bound set, or through DecideWithin, the coalescer also
// bounds how long each call waits, with one timer for all of them instead
// of a context with a deadline per call.
//
// Calls made with DecideOn name the node of the store (a Redis Cluster
// primary) that decides all their requests: they queue, merge and go out
// with the calls of that node only, on workers of its own, so that a node
// that stops answering holds up no call of the others.
package coalesce

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
)

// Store is what the coalescer wraps and provides.
type Store interface {
	Decide(ctx context.Context, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error)
	Refund(ctx context.Context, at, now time.Time, reqs []algorithm.Request) error
}

// Config configures a Coalescer. The zero value is usable.
type Config struct {
	// Workers is how many merged calls of one node (see DecideOn), or of
	// the calls that name none, may be in flight at once. Default 4.
	Workers int
	// MaxBatch caps the requests in one merged call. Default 256.
	MaxBatch int
	// Timeout bounds each merged call. Default 50ms. Callers' own
	// deadlines still bound how long they wait.
	Timeout time.Duration
	// Yields is how many times a worker yields the processor to let more
	// requests join a batch before it sends it. Default 2; negative 0.
	Yields int
	// Bound, if positive, bounds every Decide: one not answered within
	// Bound of being called fails with an error that wraps ErrTimeout
	// and context.DeadlineExceeded (its requests may still be decided).
	// Default 0: only callers' contexts bound how long they wait.
	Bound time.Duration
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if c.Workers < 0 || c.MaxBatch < 0 || c.Timeout < 0 || c.Bound < 0 {
		return fmt.Errorf("coalesce: negative Workers %d, MaxBatch %d, Timeout %v or Bound %v", c.Workers, c.MaxBatch, c.Timeout, c.Bound)
	}
	return nil
}

// ErrClosed is returned by Decide after Close.
var ErrClosed = errors.New("coalesce: closed")

// ErrTimeout is wrapped by the error of a Decide that Config.Bound cut
// short.
var ErrTimeout = errors.New("coalesce: no answer within the bound")

// Coalescer is a Store that merges concurrent Decide calls. Safe for
// concurrent use. New starts its workers; Close stops them.
type Coalescer struct {
	inner    Store
	maxBatch int
	yields   int
	workers  int
	timeout  time.Duration
	stop     chan struct{}
	wg       sync.WaitGroup

	// mu orders sends to the lanes' queues, and the start of lanes, before
	// Close: senders hold it for reading.
	mu     sync.RWMutex
	closed bool
	// lanes holds a queue per node named by DecideOn, each with workers
	// of its own; shared takes every other call, and the nodes past
	// maxLanes.
	lmu    sync.RWMutex
	lanes  map[string]*lane
	shared *lane

	bound    time.Duration
	errBound error
	// With a bound, the jobs not yet answered, oldest (so first to
	// expire) first, and a timer set for the oldest's deadline.
	bmu     sync.Mutex
	waiting list
	timer   *time.Timer
	graced  bool // the timer's last firing was late and expired nothing
}

// lane is the queue of one node's calls, and of the workers that send
// them.
type lane struct{ queue chan *job }

// maxLanes bounds the lanes of named nodes: a Redis Cluster has at most a
// few hundred primaries (and a failover adds one).
const maxLanes = 1024

// A job is one Decide call. It is answered once, by whoever moves its state
// from pending: the worker that decided it, or (with a bound) the timer
// that expired it.
type job struct {
	now  time.Time
	reqs []algorithm.Request
	res  []algorithm.Result
	err  error
	done chan struct{}

	state    atomic.Uint32
	deadline time.Time
	// watched is set by the caller before it queues the job, and read
	// after: whether the job is under a bound.
	watched bool
	prev    *job // in Coalescer.waiting
	next    *job
	listed  bool
}

// Job states.
const (
	pending uint32 = iota
	answered
	expired
)

// answer moves j from pending to to, and reports whether it did: the
// caller that did, and only it, may set j's results and send on done.
func (j *job) answer(to uint32) bool { return j.state.CompareAndSwap(pending, to) }

// list is a doubly linked list of jobs.
type list struct{ front, back *job }

func (l *list) push(j *job) {
	j.prev, j.next, j.listed = l.back, nil, true
	if l.back != nil {
		l.back.next = j
	} else {
		l.front = j
	}
	l.back = j
}

// insert puts j in deadline order, searching from the back (where a job
// with the latest deadline goes).
func (l *list) insert(j *job) {
	at := l.back
	for at != nil && at.deadline.After(j.deadline) {
		at = at.prev
	}
	if at == l.back {
		l.push(j)
		return
	}
	j.listed = true
	j.prev = at
	if at == nil {
		j.next = l.front
		l.front.prev = j
		l.front = j
		return
	}
	j.next = at.next
	at.next.prev = j
	at.next = j
}

func (l *list) remove(j *job) {
	if !j.listed {
		return
	}
	if j.prev != nil {
		j.prev.next = j.next
	} else {
		l.front = j.next
	}
	if j.next != nil {
		j.next.prev = j.prev
	} else {
		l.back = j.prev
	}
	j.prev, j.next, j.listed = nil, nil, false
}

var jobs = sync.Pool{New: func() any { return &job{done: make(chan struct{}, 1)} }}

// New starts a coalescer in front of inner.
func New(inner Store, cfg Config) (*Coalescer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Workers == 0 {
		cfg.Workers = 4
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 256
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 50 * time.Millisecond
	}
	if cfg.Yields == 0 {
		cfg.Yields = 2
	}
	c := &Coalescer{inner: inner, maxBatch: cfg.MaxBatch, yields: max(0, cfg.Yields), workers: cfg.Workers, timeout: cfg.Timeout, stop: make(chan struct{})}
	c.bound = cfg.Bound
	c.errBound = fmt.Errorf("%w: %w", ErrTimeout, context.DeadlineExceeded)
	c.timer = time.AfterFunc(time.Hour, c.expire)
	c.timer.Stop()
	c.lanes = map[string]*lane{}
	c.shared = c.startLane(4096)
	return c, nil
}

// startLane starts a lane's workers. The caller holds mu for reading
// with closed unset, or is New.
func (c *Coalescer) startLane(queue int) *lane {
	ln := &lane{queue: make(chan *job, queue)}
	for range c.workers {
		c.wg.Go(func() { c.work(ln) })
	}
	return ln
}

// lane returns the lane of node ("": shared), starting it on first use.
// The caller holds mu for reading with closed unset.
func (c *Coalescer) lane(node string) *lane {
	if node == "" {
		return c.shared
	}
	c.lmu.RLock()
	ln := c.lanes[node]
	c.lmu.RUnlock()
	if ln != nil {
		return ln
	}
	c.lmu.Lock()
	defer c.lmu.Unlock()
	if ln = c.lanes[node]; ln == nil {
		if len(c.lanes) >= maxLanes {
			return c.shared
		}
		ln = c.startLane(1024)
		c.lanes[node] = ln
	}
	return ln
}

// Close stops the workers after the calls in flight; later Decides fail
// with ErrClosed.
func (c *Coalescer) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.stop)
	}
	c.mu.Unlock()
	c.wg.Wait()
	c.timer.Stop()
}

// CallBound returns Config.Bound: how long a Decide may take at most,
// whatever its context; 0 for no bound.
func (c *Coalescer) CallBound() time.Duration { return c.bound }

// Decide queues reqs for the next merged call and waits for its results,
// for ctx, or for Config.Bound.
func (c *Coalescer) Decide(ctx context.Context, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error) {
	return c.DecideWithin(ctx, c.bound, now, reqs)
}

// DecideWithin is Decide bounded by within instead of Config.Bound (0: no
// bound): one not answered within fails with an error that wraps
// ErrTimeout and context.DeadlineExceeded (its requests may still be
// decided). Bounds that change from call to call are kept in order, at a
// cost that grows with how many calls in flight a shorter bound
// overtakes: meant for a bound that changes slowly (the limiter's
// adaptive store timeout).
func (c *Coalescer) DecideWithin(ctx context.Context, within time.Duration, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error) {
	return c.DecideOn(ctx, "", within, now, reqs)
}

// DecideOn is DecideWithin for requests that node, a node of the wrapped
// store (see Node), decides all of: the call is merged only with calls of
// the same node, and sent by workers of that node's own, so that it never
// waits behind a node that does not answer. "" is DecideWithin: a call
// merged with any other of "" (requests of several nodes, or of a store
// that names none).
func (c *Coalescer) DecideOn(ctx context.Context, node string, within time.Duration, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if len(reqs) >= c.maxBatch {
		if within > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, within)
			defer cancel()
		}
		return c.inner.Decide(ctx, now, reqs)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j := jobs.Get().(*job)
	j.now, j.reqs, j.res, j.err, j.watched = now, reqs, nil, nil, within > 0
	j.state.Store(pending)
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		jobs.Put(j)
		return nil, ErrClosed
	}
	queue := c.lane(node).queue
	if within > 0 {
		c.watch(j, within)
	}
	// The queue almost always has room: a send that cannot wait costs
	// less than a select.
	select {
	case queue <- j:
		c.mu.RUnlock()
	default:
		select {
		case queue <- j:
			c.mu.RUnlock()
		case <-j.done:
			// The bound expired it before the queue had room (its node
			// does not answer, and the queue is full): never queued.
			c.mu.RUnlock()
			return c.took(ctx, j)
		case <-ctx.Done():
			c.mu.RUnlock()
			// Unless the timer took the job, it stays pending: nothing
			// will answer it, and it is dropped, not reused.
			if j.answer(expired) {
				c.unwatch(j)
			}
			return nil, ctx.Err()
		}
	}
	select {
	case <-j.done:
		return c.took(ctx, j)
	case <-ctx.Done():
		// The job completes later; its worker's send to the buffered done
		// channel does not block, and the job is dropped, not reused.
		return nil, ctx.Err()
	}
}

// took returns what answered j, and puts j back in the pool unless the
// timer expired it. A job expired after its caller gave up (both ready at
// once) returns ctx's error: the caller's, not the store's.
func (c *Coalescer) took(ctx context.Context, j *job) ([]algorithm.Result, error) {
	if j.state.Load() == expired {
		// A worker may still hold the job: drop it, do not reuse it.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, c.errBound
	}
	res, err := j.res, j.err
	jobs.Put(j)
	return res, err
}

// watch puts j, just called, under the bound within.
func (c *Coalescer) watch(j *job, within time.Duration) {
	j.deadline = time.Now().Add(within)
	c.bmu.Lock()
	c.waiting.insert(j)
	if c.waiting.front == j {
		c.timer.Reset(within)
	}
	c.bmu.Unlock()
}

// unwatch takes j, answered, from under the bound.
func (c *Coalescer) unwatch(j *job) {
	if !j.watched {
		return
	}
	c.bmu.Lock()
	c.waiting.remove(j)
	c.bmu.Unlock()
}

// expire answers the jobs past their deadline, and sets the timer for the
// next deadline. Deadlines follow the order of the list, but for calls
// made at nearly the same time: a job is never answered before its
// deadline, and at worst late by that much.
//
// A timer that fires late says the process was not running when the
// deadline passed (descheduled on a saturated core, or paused): answers
// that came in meanwhile sit unread in the network poller, which Go's
// scheduler consults after it has run the timers due, so expiring at once
// would fail calls whose answers are already here. Such a firing expires
// nothing and looks again as long after as it was late (see grace).
func (c *Coalescer) expire() {
	now := time.Now()
	c.bmu.Lock()
	defer c.bmu.Unlock()
	if f := c.waiting.front; f != nil {
		if g := grace(now, f.deadline, c.graced, c.timeout); g > 0 {
			c.graced = true
			c.timer.Reset(g)
			return
		}
	}
	c.graced = false
	for j := c.waiting.front; j != nil; j = c.waiting.front {
		if j.deadline.After(now) {
			c.timer.Reset(j.deadline.Sub(now))
			return
		}
		c.waiting.remove(j)
		if j.answer(expired) {
			j.done <- struct{}{}
		}
	}
}

// lateFiring is how late a bound's timer may fire without being taken for
// a sign that the process was not running.
const lateFiring = time.Millisecond

// grace returns how long to wait before expiring calls whose deadline
// passed, when the timer set for deadline fired at now: as long as it was
// late (at most limit), if it was more than lateFiring late and the last
// firing was not itself a grace; 0 to expire them now.
func grace(now, deadline time.Time, graced bool, limit time.Duration) time.Duration {
	late := now.Sub(deadline)
	if graced || late <= lateFiring {
		return 0
	}
	return min(late, limit)
}

// Refund passes refunds straight to the wrapped store.
func (c *Coalescer) Refund(ctx context.Context, at, now time.Time, reqs []algorithm.Request) error {
	return c.inner.Refund(ctx, at, now, reqs)
}

// Ping passes a ping to the wrapped store when it has one.
func (c *Coalescer) Ping(ctx context.Context) error {
	if p, ok := c.inner.(interface{ Ping(context.Context) error }); ok {
		return p.Ping(ctx)
	}
	return nil
}

// Node passes the lookup of a request's node to the wrapped store when it
// has one (see limiter.NodeLocator); otherwise it returns "": the store is
// one node.
func (c *Coalescer) Node(ctx context.Context, r algorithm.Request) (string, error) {
	if l, ok := c.inner.(interface {
		Node(context.Context, algorithm.Request) (string, error)
	}); ok {
		return l.Node(ctx, r)
	}
	return "", nil
}

// work sends ln's calls until Close.
func (c *Coalescer) work(ln *lane) {
	var batch []*job
	var reqs []algorithm.Request
	for {
		var first *job
		select {
		case first = <-ln.queue:
		case <-c.stop:
			c.drain(ln)
			return
		}
		batch = append(batch[:0], first)
		n := len(first.reqs)
		// Take what is queued; then yield once or twice, so callers that
		// are runnable (their requests already read) can join this batch
		// instead of the next round trip. Idle, that costs two yields.
		for yields := 0; n < c.maxBatch; {
			select {
			case j := <-ln.queue:
				batch = append(batch, j)
				n += len(j.reqs)
				continue
			default:
			}
			if yields == c.yields {
				break
			}
			yields++
			runtime.Gosched()
		}
		reqs = c.run(batch, reqs[:0])
	}
}

// run sends one merged call for batch and hands each job its results. It
// merges the requests into reqs, and returns it for the next batch.
func (c *Coalescer) run(batch []*job, reqs []algorithm.Request) []algorithm.Request {
	if len(batch) == 1 {
		j := batch[0]
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		res, err := c.inner.Decide(ctx, j.now, j.reqs)
		cancel()
		if j.answer(answered) {
			c.unwatch(j)
			j.res, j.err = res, err
			j.done <- struct{}{}
		}
		return reqs
	}
	now := batch[0].now
	for _, j := range batch {
		if j.now.After(now) {
			now = j.now
		}
		reqs = append(reqs, j.reqs...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	res, err := c.inner.Decide(ctx, now, reqs)
	cancel()
	for i, j := range batch {
		if j.watched {
			c.bmu.Lock()
			for _, j := range batch[i:] {
				if j.state.Load() == pending {
					c.waiting.remove(j)
				}
			}
			c.bmu.Unlock()
			break
		}
	}
	off := 0
	for _, j := range batch {
		n := len(j.reqs)
		if j.answer(answered) {
			if err != nil {
				j.err = err
			} else {
				j.res = res[off : off+n : off+n]
			}
			j.done <- struct{}{}
		}
		off += n
	}
	clear(reqs) // keep no keys alive until the next batch
	return reqs
}

// drain fails the jobs still queued in ln at Close.
func (c *Coalescer) drain(ln *lane) {
	for {
		select {
		case j := <-ln.queue:
			if j.answer(answered) {
				c.unwatch(j)
				j.err = ErrClosed
				j.done <- struct{}{}
			}
		default:
			return
		}
	}
}
