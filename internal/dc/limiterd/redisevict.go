package limiterd

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// warnEviction logs a warning for each node of c (see eachNode) that
// evicts keys when full: a maxmemory set and a maxmemory-policy other
// than noeviction. An evicted counter starts afresh, so its key is
// admitted its whole limit again (docs/deployment.md). A node that does
// not answer CONFIG GET is logged at debug, as for its hz.
func warnEviction(ctx context.Context, c any, log *slog.Logger) {
	check := func(ctx context.Context, n *redis.Client) error {
		limit, err := n.ConfigGet(ctx, "maxmemory").Result()
		if err != nil {
			log.Debug("could not read Redis's maxmemory", "node", n.Options().Addr, "err", err)
			return nil
		}
		policy, err := n.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			log.Debug("could not read Redis's maxmemory-policy", "node", n.Options().Addr, "err", err)
			return nil
		}
		if p := policy["maxmemory-policy"]; limit["maxmemory"] != "0" && p != "" && p != "noeviction" {
			log.Warn("Redis deletes keys when full: a deleted counter starts afresh, and its key is admitted its whole limit again; set maxmemory-policy noeviction (docs/deployment.md)",
				"node", n.Options().Addr, "maxmemory", limit["maxmemory"], "maxmemory_policy", p)
		}
		return nil
	}
	if err := eachNode(ctx, c, check); err != nil {
		log.Debug("could not read Redis Cluster's nodes for their maxmemory-policy", "err", err)
	}
}
