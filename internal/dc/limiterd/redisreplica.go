package limiterd

import (
	"context"
	"log/slog"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/platform/redisinfo"
)

// warnReplica logs a warning when c, a client of one Redis, is connected
// to a replica: it refuses the scripts' writes (READONLY), so that every
// decision follows its rule's failure_mode until --redis names the
// primary. The warning names the primary the replica follows. A node that
// does not answer INFO is logged at debug. A Redis Cluster's clients are
// not checked: they route to the primaries themselves. The caller leaves
// out a client through Sentinels, which is wherever they name the
// primary: the advice would be wrong for it.
func warnReplica(ctx context.Context, c any, log *slog.Logger) {
	n, ok := c.(*redis.Client)
	if !ok {
		return
	}
	info, err := n.Info(ctx, "replication").Result()
	if err != nil {
		log.Debug("could not read Redis's replication role", "node", n.Options().Addr, "err", err)
		return
	}
	fields := redisinfo.Fields(info)
	if fields["role"] != "slave" {
		return
	}
	log.Warn("the Redis --redis names is a replica: it refuses the limiter's writes (READONLY), so every decision follows its rule's failure_mode; name the primary, or the Sentinels that watch it (docs/operations.md)",
		"node", n.Options().Addr, "primary", net.JoinHostPort(fields["master_host"], fields["master_port"]))
}
