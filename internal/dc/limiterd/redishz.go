package limiterd

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// advisedHz is the least Redis hz the limiter advises (docs/operations.md,
// "Run the DC's Redis with hz 100"): Redis's active expiry may hold a node
// for a quarter of each 1/hz tick, 25 ms at the default hz of 10, when
// many keys expire together.
const advisedHz = 100

// defaultHz is Redis's hz when it is not configured.
const defaultHz = 10

// expiryPause reads the hz of each node of c (a Redis Cluster's primaries
// and replicas), logs at info each node below advisedHz, and returns the
// lowest hz read and how long a node may pause of itself at it to delete
// expired keys: a quarter of 1/hz (limiter.Config.StorePause). A node
// that does not answer CONFIG GET (managed services often rename or
// refuse CONFIG) is taken to run at Redis's default hz, and logged at
// debug: the advice is only advice.
func expiryPause(ctx context.Context, c any, log *slog.Logger) (pause time.Duration, hz int) {
	var mu sync.Mutex // ForEachShard reads the nodes concurrently
	lowest := 0
	check := func(ctx context.Context, n *redis.Client) error {
		hz, err := readHz(ctx, n)
		switch {
		case err != nil:
			hz = defaultHz
			log.Debug("could not read Redis's hz; taking its default", "node", n.Options().Addr, "default", defaultHz, "err", err)
		case hz < advisedHz:
			log.Info("Redis runs at a low hz: when many keys expire together it may stall every call for about a quarter of 1/hz; hz 100 makes that about 2.5 ms (docs/operations.md)",
				"node", n.Options().Addr, "hz", hz, "stall", quarterTick(hz))
		}
		mu.Lock()
		if lowest == 0 || hz < lowest {
			lowest = hz
		}
		mu.Unlock()
		return nil
	}
	if err := eachNode(ctx, c, check); err != nil {
		log.Debug("could not read Redis Cluster's nodes for their hz", "err", err)
	}
	if lowest == 0 {
		lowest = defaultHz
	}
	return quarterTick(lowest), lowest
}

// eachNode calls fn with c's node, when c is a client of one Redis, or
// with every node of c, when c is a Redis Cluster client: replicas too,
// since a failover makes one a primary. It returns the error of reading
// the cluster's nodes.
func eachNode(ctx context.Context, c any, fn func(ctx context.Context, n *redis.Client) error) error {
	switch c := c.(type) {
	case *redis.Client:
		return fn(ctx, c)
	case *redis.ClusterClient:
		return c.ForEachShard(ctx, fn)
	}
	return nil
}

// readHz returns the hz of node n: CONFIG GET hz, a positive integer.
func readHz(ctx context.Context, n *redis.Client) (int, error) {
	m, err := n.ConfigGet(ctx, "hz").Result()
	if err != nil {
		return 0, err
	}
	hz, err := strconv.Atoi(m["hz"])
	if err == nil && hz <= 0 {
		err = fmt.Errorf("hz %d is not positive", hz)
	}
	return hz, err
}

// quarterTick is how long Redis at hz may spend of each 1/hz tick
// deleting expired keys: a quarter of it.
func quarterTick(hz int) time.Duration {
	return time.Second / time.Duration(4*hz)
}
