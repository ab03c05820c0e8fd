package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/pkg/algorithm"
)

// NodeError is the error of one request that a Redis node failed (or that
// could not reach its node): Result.Err and Refund's error wrap one. On
// Redis Cluster, requests on other nodes are unaffected, so a caller can
// keep one circuit breaker per node (see Node).
type NodeError struct {
	// Node is the address (host:port) of the primary that served the
	// request's key when it failed, from the client's slot map; "" when
	// the client does not say (a *redis.Ring).
	Node string
	// Err is what went wrong; it wraps ErrReply when the node answered
	// with a reply of the wrong shape.
	Err error
}

func (e *NodeError) Error() string {
	if e.Node == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("%v (node %s)", e.Err, e.Node)
}

func (e *NodeError) Unwrap() error { return e.Err }

// clusterClient is what a *redis.ClusterClient offers beyond Client: the
// primary of a key, and a reload of the slot map.
type clusterClient interface {
	MasterForKey(ctx context.Context, key string) (*redis.Client, error)
	ReloadState(ctx context.Context)
}

// singleClient is what a *redis.Client offers beyond Client.
type singleClient interface {
	Options() *redis.Options
}

// Node returns the address of the Redis node that decides r: on Redis
// Cluster, the primary of r's slot in the client's slot map (which may
// load the map the first time); for a single *redis.Client, its address;
// "" when the client does not say. It sends nothing to Redis once the map
// is loaded. After a failover the map names the promoted replica once the
// store has reloaded it (it does so when a request fails). When the map
// could not be loaded, lookups fail with that error for slotMapRetry
// (250 ms) before the map is tried again.
func (s *Store) Node(ctx context.Context, r algorithm.Request) (string, error) {
	if c, ok := s.c.(singleClient); ok {
		return c.Options().Addr, nil // one node: no key to place
	}
	return s.node(ctx, s.RedisKey(r))
}

// slotMapRetry is how long after a cluster client failed to load its
// slot map the store answers lookups of a key's node with that failure
// rather than load it again. A cluster the limiter cannot reach or log
// in to would otherwise be dialled, over TLS and with AUTH, once per
// decision, and each decision would wait for it before the breaker of
// its node could step in.
const slotMapRetry = 250 * time.Millisecond

// lookupFailure is the last failure to find a key's node, and when.
type lookupFailure struct {
	at  time.Time
	err error
}

func (s *Store) node(ctx context.Context, key string) (string, error) {
	switch c := s.c.(type) {
	case clusterClient:
		if f := s.lookupFailed.Load(); f != nil && s.now().Sub(f.at) < slotMapRetry {
			return "", fmt.Errorf("redisstore: node of %s: %w", key, f.err)
		}
		n, err := c.MasterForKey(ctx, key)
		switch {
		case err != nil && !errors.Is(err, context.Canceled):
			// The map, not the key: every key's lookup fails alike
			// (go-redis names a random node for a slot no node serves).
			// A caller gone says nothing of the map; a caller's deadline
			// that passed while the map loaded does: it did not load
			// within a store call's bound.
			s.lookupFailed.Store(&lookupFailure{at: s.now(), err: err})
			fallthrough
		case err != nil:
			return "", fmt.Errorf("redisstore: node of %s: %w", key, err)
		case s.lookupFailed.Load() != nil:
			s.lookupFailed.Store(nil)
		}
		return n.Options().Addr, nil
	case singleClient:
		return c.Options().Addr, nil
	}
	return "", nil
}

// failures wraps the errors of one call's requests, and asks a cluster
// client once per call to reload its slot map when an error says the map
// may be stale: a node that cannot be reached (a dead primary never
// answers MOVED, and go-redis would otherwise keep its map for a minute),
// or one that says the cluster changed.
type failures struct {
	s        *Store
	reloaded bool
}

func (f *failures) wrap(ctx context.Context, c *call, err error) error {
	key := c.key()
	node, _ := f.s.node(ctx, key)
	if !f.reloaded && staleMap(err) {
		if cc, ok := f.s.c.(clusterClient); ok {
			cc.ReloadState(ctx)
			f.reloaded = true
		}
	}
	return &NodeError{Node: node, Err: replyError(err)}
}

// staleMap reports whether err may come from a slot map that no longer
// matches the cluster: any failure to get a reply (other than a cancelled
// call), or a reply saying the cluster moved on.
func staleMap(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return !errors.Is(err, context.Canceled) && !badShape(err)
	}
	for _, p := range []string{"CLUSTERDOWN", "MOVED", "ASK", "TRYAGAIN", "READONLY", "MASTERDOWN", "LOADING"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}
