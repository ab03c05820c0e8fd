package listwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/platform/backoff"
)

// ErrRunning is returned by Run when the Loop is already running or has
// run: a Loop runs once.
var ErrRunning = errors.New("listwatch: loop already ran")

// errCompacted marks a watch ended by a compaction of its start revision.
var errCompacted = errors.New("listwatch: watch revision compacted")

// Event is one key under the prefix: in a listing, a key as it is; in a
// watch, a put (Delete false) or a deletion (Delete true, Value nil).
// Key and Value are etcd's bytes, not copied: a handler that keeps them
// past its call must not modify them.
type Event struct {
	Key, Value []byte
	// Revision is the key's ModRevision: the revision of the put, or of
	// the deletion.
	Revision int64
	Delete   bool
}

// Handler receives what a Loop reads. Its methods are called from Run's
// goroutine, one at a time, never concurrently.
type Handler interface {
	// Replace gives every key under the prefix as of revision rev, in key
	// order, after the first listing and after every re-listing. The
	// handler drops whatever it knew and takes these instead (keys it had
	// and that are not listed were deleted meanwhile).
	Replace(rev int64, kvs []Event)
	// Apply gives the changes of one watch response, in revision order;
	// afterwards the handler is up to date with every change up to
	// revision rev. A progress notification calls Apply with no events
	// and a higher rev.
	Apply(rev int64, events []Event)
}

// Config configures a Loop. Client, Prefix and Handler are required; the
// zero values of the others are their defaults.
type Config struct {
	// Client talks to etcd. Required; the Loop does not close it.
	Client *clientv3.Client
	// Prefix is the key prefix listed and watched. Required, not empty.
	Prefix string
	// Handler receives the listings and the changes. Required.
	Handler Handler
	// PageSize is how many keys one request of a listing reads.
	// Default 1000.
	PageSize int64
	// RequestTimeout bounds each request of a listing. Default 5s.
	RequestTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before a retry: it doubles
	// from MinBackoff up to MaxBackoff, drawn from its upper half, and
	// starts again from MinBackoff after a watch that delivered anything.
	// Defaults 100ms and 5s.
	MinBackoff, MaxBackoff time.Duration
	// NoProgressNotify turns off the watch's progress notifications. By
	// default (false) the watch asks for them, so that Revision advances
	// while the prefix is quiet and other keys change.
	NoProgressNotify bool
	// NoRequireLeader lets the watch go on with a member that has lost its
	// leader. By default (false) the watch requires a leader
	// (clientv3.WithRequireLeader): a member cut off from the others ends
	// it, and the Loop lists again through a member that can answer.
	NoRequireLeader bool
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	switch {
	case c.Client == nil:
		return errors.New("listwatch: Config.Client is required")
	case c.Prefix == "":
		return errors.New("listwatch: Config.Prefix is required")
	case c.Handler == nil:
		return errors.New("listwatch: Config.Handler is required")
	case c.PageSize < 0:
		return fmt.Errorf("listwatch: negative Config.PageSize %d", c.PageSize)
	case c.RequestTimeout < 0, c.MinBackoff < 0, c.MaxBackoff < 0:
		return errors.New("listwatch: negative duration in Config")
	case c.MinBackoff > 0 && c.MaxBackoff > 0 && c.MinBackoff > c.MaxBackoff:
		return fmt.Errorf("listwatch: Config.MinBackoff %v above MaxBackoff %v", c.MinBackoff, c.MaxBackoff)
	}
	return nil
}

// Loop lists and watches one prefix into a Handler. Create it with New and
// drive it with Run; Revision, Synced, Wait and Stats are safe for
// concurrent use at any time.
type Loop struct {
	cfg     Config
	kv      clientv3.KV
	watcher clientv3.Watcher
	log     *slog.Logger
	ran     atomic.Bool

	mu       sync.Mutex
	rev      int64         // applied; guarded by mu
	advanced chan struct{} // closed and replaced when rev moves; guarded by mu

	lists, listErrors, compactions, watches, watchErrors atomic.Uint64
}

// New returns a Loop for cfg; Run starts it.
func New(cfg Config) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = 1000
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.MinBackoff)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Loop{
		cfg:      cfg,
		kv:       cfg.Client.KV,
		watcher:  cfg.Client.Watcher,
		log:      cfg.Logger.With("prefix", cfg.Prefix),
		advanced: make(chan struct{}),
	}, nil
}

// Revision returns the revision the handler is up to date with: every
// change under the prefix up to it has been handed over. It is 0 until the
// first listing has been applied.
func (l *Loop) Revision() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev
}

// Synced reports whether the first listing has been applied.
func (l *Loop) Synced() bool { return l.Revision() > 0 }

// Wait waits until the handler is up to date with revision rev (use 1 to
// wait for the first listing), or ctx ends.
func (l *Loop) Wait(ctx context.Context, rev int64) error {
	for {
		l.mu.Lock()
		cur, ch := l.rev, l.advanced
		l.mu.Unlock()
		if cur >= max(rev, 1) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("listwatch: %s at revision %d, waiting for %d: %w", l.cfg.Prefix, cur, rev, ctx.Err())
		}
	}
}

// setRevision records that the handler is up to date with rev and wakes
// the waiters.
func (l *Loop) setRevision(rev int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rev == l.rev {
		return
	}
	l.rev = rev
	close(l.advanced)
	l.advanced = make(chan struct{})
}

// Stats counts what a Loop did since it was created.
type Stats struct {
	// Lists counts the listings applied (the first and every re-list);
	// ListErrors the failed ones.
	Lists, ListErrors uint64
	// Watches counts the watches started; Compactions those ended by a
	// compaction; WatchErrors those ended otherwise while running.
	Watches, Compactions, WatchErrors uint64
	// Revision is what Revision returns.
	Revision int64
}

// Stats returns the Loop's counters.
func (l *Loop) Stats() Stats {
	return Stats{
		Lists:       l.lists.Load(),
		ListErrors:  l.listErrors.Load(),
		Watches:     l.watches.Load(),
		Compactions: l.compactions.Load(),
		WatchErrors: l.watchErrors.Load(),
		Revision:    l.Revision(),
	}
}

// Run lists and watches until ctx ends, retrying every error, then returns
// nil once its watch is cancelled; no call of the handler is in progress
// after it returns. It returns ErrRunning when called a second time. Run
// starts no goroutine of its own: the handler is called from the
// goroutine that called Run.
func (l *Loop) Run(ctx context.Context) error {
	if !l.ran.CompareAndSwap(false, true) {
		return ErrRunning
	}
	bo := backoff.Backoff{Min: l.cfg.MinBackoff, Max: l.cfg.MaxBackoff}
	for {
		rev, err := l.list(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			l.listErrors.Add(1)
			l.log.Warn("listwatch: listing failed; retrying", "err", err)
			if !bo.Wait(ctx) {
				return nil
			}
			continue
		}
		healthy, err := l.follow(ctx, rev)
		if ctx.Err() != nil {
			return nil
		}
		if healthy {
			bo.Reset()
		}
		if errors.Is(err, errCompacted) {
			l.compactions.Add(1)
			l.log.Info("listwatch: watch compacted; listing again", "err", err)
			continue
		}
		l.watchErrors.Add(1)
		l.log.Warn("listwatch: watch ended; listing again", "err", err)
		if !bo.Wait(ctx) {
			return nil
		}
	}
}

// list reads the prefix, in pages at one revision, hands it to
// Handler.Replace and returns the revision.
func (l *Loop) list(ctx context.Context) (int64, error) {
	end := clientv3.GetPrefixRangeEnd(l.cfg.Prefix)
	var (
		kvs []Event
		rev int64
		key = l.cfg.Prefix
	)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(l.cfg.PageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		rctx, cancel := context.WithTimeout(ctx, l.cfg.RequestTimeout)
		resp, err := l.kv.Get(rctx, key, opts...)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("list %s at revision %d: %w", l.cfg.Prefix, rev, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			kvs = append(kvs, Event{Key: kv.Key, Value: kv.Value, Revision: kv.ModRevision})
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	l.cfg.Handler.Replace(rev, kvs)
	l.lists.Add(1)
	l.setRevision(rev)
	return rev, nil
}

// follow watches the prefix after revision rev into Handler.Apply until the
// watch ends or ctx does. healthy tells whether the watch delivered
// anything.
func (l *Loop) follow(ctx context.Context, rev int64) (healthy bool, err error) {
	wctx := ctx
	if !l.cfg.NoRequireLeader {
		wctx = clientv3.WithRequireLeader(ctx)
	}
	wctx, cancel := context.WithCancel(wctx)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(rev + 1)}
	if !l.cfg.NoProgressNotify {
		opts = append(opts, clientv3.WithProgressNotify())
	}
	l.watches.Add(1)
	from := rev + 1
	var events []Event
	for resp := range l.watcher.Watch(wctx, l.cfg.Prefix, opts...) {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			return healthy, fmt.Errorf("%w: watch %s from revision %d: compacted at %d", errCompacted, l.cfg.Prefix, from, resp.CompactRevision)
		}
		if err := resp.Err(); err != nil {
			return healthy, fmt.Errorf("watch %s from revision %d: %w", l.cfg.Prefix, from, err)
		}
		healthy = true
		if resp.IsProgressNotify() {
			// Sent only when the watch has caught up: every change up
			// to the header's revision has been delivered.
			if resp.Header.Revision > rev {
				rev = resp.Header.Revision
				l.cfg.Handler.Apply(rev, nil)
				l.setRevision(rev)
			}
			continue
		}
		// The header's revision may run ahead of the events of a response
		// sent while catching up: only the events' revisions are sure.
		events = events[:0]
		applied := int64(0)
		for _, ev := range resp.Events {
			applied = max(applied, ev.Kv.ModRevision)
			events = append(events, Event{Key: ev.Kv.Key, Value: ev.Kv.Value, Revision: ev.Kv.ModRevision, Delete: ev.Type == clientv3.EventTypeDelete})
		}
		if applied <= rev {
			continue
		}
		rev = applied
		l.cfg.Handler.Apply(rev, events)
		clear(events) // let the values go until the next response
		l.setRevision(rev)
	}
	return healthy, fmt.Errorf("watch %s from revision %d: channel closed", l.cfg.Prefix, from)
}
