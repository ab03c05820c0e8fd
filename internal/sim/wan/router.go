package wan

import (
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// router moves packets from the TUN device back into it after each path's
// one-way delay. Its two goroutines (reader and writer) are started by
// start and stopped by stop, which waits for them.
type router struct {
	tun   io.ReadWriteCloser
	sub   netip.Prefix
	sites int // core + DCs
	log   *slog.Logger
	now   func() time.Time

	delays []atomic.Int64 // one-way, per path (from*sites+to)
	fwd    []atomic.Uint64
	drop   []atomic.Uint64
	other  atomic.Uint64 // packets that are not IPv4 between two sites
	errs   atomic.Uint64 // failed writes

	mu   sync.Mutex
	line *delayLine
	wake chan struct{} // a packet may now be due sooner
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

func newRouter(tun io.ReadWriteCloser, sub netip.Prefix, sites, limit int, log *slog.Logger) *router {
	paths := sites * sites
	return &router{
		tun: tun, sub: sub, sites: sites, log: log, now: time.Now,
		delays: make([]atomic.Int64, paths), fwd: make([]atomic.Uint64, paths), drop: make([]atomic.Uint64, paths),
		line: newDelayLine(paths, limit), wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
}

// setDelay sets the one-way delay between sites a and b, both ways.
func (r *router) setDelay(a, b int, d time.Duration) {
	r.delays[a*r.sites+b].Store(int64(d))
	r.delays[b*r.sites+a].Store(int64(d))
}

func (r *router) start() {
	r.wg.Go(r.read)
	r.wg.Go(r.write)
}

// stop closes the device, which ends the reader, ends the writer and
// waits for both. Packets still waiting are dropped. Safe to call twice.
func (r *router) stop() {
	r.once.Do(func() {
		close(r.done)
		_ = r.tun.Close()
	})
	r.wg.Wait()
}

// read queues every packet the kernel routes into the device.
func (r *router) read() {
	buf := make([]byte, 1<<16)
	for {
		n, err := r.tun.Read(buf)
		if err != nil {
			select {
			case <-r.done:
			default:
				if !errors.Is(err, os.ErrClosed) {
					r.log.Error("wan: router stopped: read from tun", "err", err)
				}
			}
			return
		}
		from, to, ok := classify(buf[:n], r.sub, r.sites)
		if !ok {
			r.other.Add(1)
			continue
		}
		path := from*r.sites + to
		data := append([]byte(nil), buf[:n]...)
		r.mu.Lock()
		before, had := r.line.next()
		queued := r.line.push(r.now(), path, time.Duration(r.delays[path].Load()), data)
		after, _ := r.line.next()
		r.mu.Unlock()
		if !queued {
			r.drop[path].Add(1)
			continue
		}
		if !had || after.Before(before) { // the writer's timer is too late now
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}
}

// write sends each packet back into the device when it is due. It sleeps
// on a timer set to the first due packet, or until the reader wakes it.
func (r *router) write() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var batch []packet
	for {
		batch = batch[:0]
		r.mu.Lock()
		now := r.now()
		for {
			p, ok := r.line.pop(now)
			if !ok {
				break
			}
			batch = append(batch, p)
		}
		due, pending := r.line.next()
		r.mu.Unlock()
		for _, p := range batch {
			if _, err := r.tun.Write(p.data); err != nil {
				r.errs.Add(1)
				r.drop[p.path].Add(1)
				continue
			}
			r.fwd[p.path].Add(1)
		}
		wait := time.Hour
		if pending {
			wait = max(due.Sub(r.now()), 0)
		}
		timer.Reset(wait)
		select {
		case <-r.done:
			return
		case <-r.wake:
		case <-timer.C:
		}
	}
}
