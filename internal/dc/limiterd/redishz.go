package limiterd

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// advisedHz is the least Redis hz the limiter advises (docs/operations.md,
// "Run the DC's Redis with hz 100"): Redis's active expiry may hold a node
// for a quarter of each 1/hz tick, 25 ms at the default hz of 10, when
// many keys expire together.
const advisedHz = 100

// adviseHz logs, at info, each node of c (a Redis Cluster's primaries and
// replicas) whose hz is below advisedHz. It
// says nothing when the node does not answer CONFIG GET (managed services
// often rename or refuse CONFIG): the advice is only advice.
func adviseHz(ctx context.Context, c any, log *slog.Logger) {
	check := func(ctx context.Context, n *redis.Client) error {
		m, err := n.ConfigGet(ctx, "hz").Result()
		if err != nil {
			log.Debug("could not read Redis's hz", "node", n.Options().Addr, "err", err)
			return nil
		}
		if hz, err := strconv.Atoi(m["hz"]); err == nil && hz > 0 && hz < advisedHz {
			log.Info("Redis runs at a low hz: when many keys expire together it may stall every call for about a quarter of 1/hz; hz 100 makes that about 2.5 ms (docs/operations.md)",
				"node", n.Options().Addr, "hz", hz, "stall_ms", 250/hz)
		}
		return nil
	}
	switch c := c.(type) {
	case *redis.Client:
		_ = check(ctx, c)
	case *redis.ClusterClient:
		// Replicas too: a failover makes one a primary.
		if err := c.ForEachShard(ctx, check); err != nil {
			log.Debug("could not read Redis Cluster's nodes for their hz", "err", err)
		}
	}
}
