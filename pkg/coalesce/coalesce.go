// Package coalesce merges concurrent store calls into shared ones: while a
// few calls are in flight, the requests that arrive wait in a queue and the
// next free worker sends all of them in one call, which for Redis is one
// pipelined round trip. Under load this trades a syscall pair per decision
// for one per batch; when idle, a call goes out at once, adding no delay.
//
// A merged call decides every request at the latest now among the calls it
// merges (they arrived within one round trip of each other). Refunds are
// passed straight through.
package coalesce

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
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
	// Workers is how many merged calls may be in flight at once. Default 4.
	Workers int
	// MaxBatch caps the requests in one merged call. Default 256.
	MaxBatch int
	// Timeout bounds each merged call. Default 50ms. Callers' own
	// deadlines still bound how long they wait.
	Timeout time.Duration
	// Yields is how many times a worker yields the processor to let more
	// requests join a batch before it sends it. Default 2; negative 0.
	Yields int
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if c.Workers < 0 || c.MaxBatch < 0 || c.Timeout < 0 {
		return fmt.Errorf("coalesce: negative Workers %d, MaxBatch %d or Timeout %v", c.Workers, c.MaxBatch, c.Timeout)
	}
	return nil
}

// ErrClosed is returned by Decide after Close.
var ErrClosed = errors.New("coalesce: closed")

// Coalescer is a Store that merges concurrent Decide calls. Safe for
// concurrent use. New starts its workers; Close stops them.
type Coalescer struct {
	inner    Store
	maxBatch int
	yields   int
	timeout  time.Duration
	queue    chan *job
	stop     chan struct{}
	wg       sync.WaitGroup

	// mu orders sends to queue before Close: senders hold it for reading.
	mu     sync.RWMutex
	closed bool
}

type job struct {
	now  time.Time
	reqs []algorithm.Request
	res  []algorithm.Result
	err  error
	done chan struct{}
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
	c := &Coalescer{inner: inner, maxBatch: cfg.MaxBatch, yields: max(0, cfg.Yields), timeout: cfg.Timeout, queue: make(chan *job, 4096), stop: make(chan struct{})}
	for range cfg.Workers {
		c.wg.Go(c.work)
	}
	return c, nil
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
}

// Decide queues reqs for the next merged call and waits for its results,
// or for ctx.
func (c *Coalescer) Decide(ctx context.Context, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if len(reqs) >= c.maxBatch {
		return c.inner.Decide(ctx, now, reqs)
	}
	j := jobs.Get().(*job)
	j.now, j.reqs, j.res, j.err = now, reqs, nil, nil
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		jobs.Put(j)
		return nil, ErrClosed
	}
	select {
	case c.queue <- j:
		c.mu.RUnlock()
	case <-ctx.Done():
		c.mu.RUnlock()
		jobs.Put(j)
		return nil, ctx.Err()
	}
	select {
	case <-j.done:
		res, err := j.res, j.err
		jobs.Put(j)
		return res, err
	case <-ctx.Done():
		// The job completes later; its worker's send to the buffered done
		// channel does not block, and the job is dropped, not reused.
		return nil, ctx.Err()
	}
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

func (c *Coalescer) work() {
	var batch []*job
	var reqs []algorithm.Request
	for {
		var first *job
		select {
		case first = <-c.queue:
		case <-c.stop:
			c.drain()
			return
		}
		batch = append(batch[:0], first)
		n := len(first.reqs)
		// Take what is queued; then yield once or twice, so callers that
		// are runnable (their requests already read) can join this batch
		// instead of the next round trip. Idle, that costs two yields.
		for yields := 0; n < c.maxBatch; {
			select {
			case j := <-c.queue:
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
		c.run(batch, reqs[:0])
	}
}

// run sends one merged call for batch and hands each job its results.
func (c *Coalescer) run(batch []*job, reqs []algorithm.Request) {
	if len(batch) == 1 {
		j := batch[0]
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		j.res, j.err = c.inner.Decide(ctx, j.now, j.reqs)
		cancel()
		j.done <- struct{}{}
		return
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
	off := 0
	for _, j := range batch {
		if err != nil {
			j.err = err
		} else {
			j.res = res[off : off+len(j.reqs) : off+len(j.reqs)]
		}
		off += len(j.reqs)
		j.done <- struct{}{}
	}
}

// drain fails the jobs still queued at Close.
func (c *Coalescer) drain() {
	for {
		select {
		case j := <-c.queue:
			j.err = ErrClosed
			j.done <- struct{}{}
		default:
			return
		}
	}
}
