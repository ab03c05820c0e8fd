package limiterd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/pkg/logthrottle"
)

// redisLogEvery is the least time between two of go-redis's log lines of
// one kind (one format string).
const redisLogEvery = 10 * time.Second

// RouteRedisLog sends go-redis's own log lines — dials that failed, a
// Sentinel's new primary, a connection pool's troubles — to log, as
// warnings with msg "redis client" and the line in "detail", where
// go-redis would write them to stderr in a format of its own. Lines of
// one kind are written at most once per redisLogEvery (an unreachable
// Redis fails a dial per attempt), each counting those held back.
//
// go-redis has one logger for the whole process: call RouteRedisLog once,
// from main, before any Redis client is made.
func RouteRedisLog(log *slog.Logger) {
	redis.SetLogger(&redisLog{log: log, kinds: logthrottle.NewKeyed(redisLogEvery, 256, nil)})
}

// redisLog is go-redis's Logging, written to a slog.Logger.
type redisLog struct {
	log   *slog.Logger
	kinds *logthrottle.Keyed // by format string
}

func (r *redisLog) Printf(ctx context.Context, format string, v ...any) {
	if held, ok := r.kinds.Allow(format); ok {
		r.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...), logthrottle.Held(held))
	}
}
