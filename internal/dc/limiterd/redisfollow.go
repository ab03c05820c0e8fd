package limiterd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/pkg/logthrottle"
)

// sentinelPoll is how often a limiter on Redis Sentinels asks them for
// the primary's address (followPrimary).
const sentinelPoll = time.Second

// sentinelPollPool is the pool size of the poll's client of each
// Sentinel. The poll uses one connection at a time; the size only puts
// off go-redis's own redial loop, which it starts after that many dials
// in a row failed (a Sentinel down, or refusing the TLS handshake) and
// which outlives the client's Close by up to a second.
const sentinelPollPool = 64

// sentinelQuiet is the least time between two warnings that no Sentinel
// answered a poll.
const sentinelQuiet = 10 * time.Second

// followAgain is how many polls after the Sentinels named another
// primary followPrimary has the client follow it again: go-redis asks the
// Sentinel it picked, which may learn of the new primary a little later
// than the one that answered the poll (the Sentinel that failed over
// tells the others at once, and every 2 s).
const followAgain = 2

// followPrimary asks the Sentinels of opt for the primary's address
// every sentinelPoll until ctx ends, and when the answer changes (the
// first included) has rc follow it (follow), then again on the next
// followAgain polls.
//
// go-redis follows a failover when a Sentinel announces it on a channel
// go-redis subscribes to (+switch-master), or when a connection to the
// old primary fails. A planned switchover (SENTINEL FAILOVER), or a
// primary the Sentinels cannot reach but the limiter can, leaves the old
// primary up and taking writes until the Sentinels reach it and demote it
// (some ten seconds after the switch; never, while they cannot reach it):
// a client that did not hear the announcement — a Sentinel user without
// the rights to subscribe (RedisSentinelACL), a subscription that was
// down at the time — decides there all that while, and the admissions it
// counts are thrown away at the demotion, with no error to tell. Asking
// bounds that time by sentinelPoll, when the Sentinel go-redis asks at
// its dial names the same primary as the one that answered the poll, or
// does within followAgain polls; one that lags longer leaves the client
// to go-redis's own following.
//
// When no Sentinel answers a poll, a warning says so (at most one per
// sentinelQuiet, with how many were held back), and once one answers
// again, an info line.
func followPrimary(ctx context.Context, rc *redis.Client, opt *redis.FailoverOptions, log *slog.Logger) {
	sentinels := make([]*redis.SentinelClient, len(opt.SentinelAddrs))
	defer func() {
		for _, s := range sentinels {
			if s != nil {
				_ = s.Close()
			}
		}
	}()
	known := "" // the primary's address, as the Sentinels last named it
	first := 0  // the Sentinel asked first: the last that answered
	again := 0  // polls left that follow again
	quiet := logthrottle.New(sentinelQuiet, nil)
	warned := false // a warning that none answered was logged, and none has since
	tick := time.NewTicker(sentinelPoll)
	defer tick.Stop()
	for {
		var lastErr error
		answered := false
		for i := range sentinels {
			j := (first + i) % len(sentinels)
			if sentinels[j] == nil {
				sentinels[j] = redis.NewSentinelClient(&redis.Options{
					Addr: opt.SentinelAddrs[j], Username: opt.SentinelUsername, Password: opt.SentinelPassword, TLSConfig: opt.TLSConfig,
					DialTimeout: opt.DialTimeout, ReadTimeout: opt.ReadTimeout, WriteTimeout: opt.WriteTimeout,
					PoolSize: sentinelPollPool, MaxRetries: -1, DialerRetries: 1,
				})
			}
			actx, cancel := context.WithTimeout(ctx, sentinelPoll)
			addr, err := sentinels[j].GetMasterAddrByName(actx, opt.MasterName).Result()
			cancel()
			if err == nil && len(addr) != 2 {
				err = fmt.Errorf("the Sentinel answered %d fields for the primary's address, want 2", len(addr))
			}
			if err != nil {
				lastErr = err
				continue
			}
			first, answered = j, true
			if warned {
				log.Info("a Redis Sentinel answers the limiter's question for the primary again", "sentinel", opt.SentinelAddrs[j])
				warned = false
			}
			if primary := net.JoinHostPort(addr[0], addr[1]); primary != known {
				if known == "" {
					log.Info("the Redis Sentinels name the primary; the limiter asks them for it every second, and follows a new one", "primary", primary)
				} else {
					log.Info("the Redis Sentinels name another primary: the limiter follows it", "primary", primary, "was", known)
				}
				known, again = primary, followAgain+1
			}
			if again > 0 {
				again--
				fctx, cancel := context.WithTimeout(ctx, sentinelPoll)
				follow(fctx, rc)
				cancel()
			}
			break
		}
		if !answered && ctx.Err() == nil {
			if held, ok := quiet.Allow(); ok {
				log.Warn("no Redis Sentinel answered the limiter's question for the primary: it follows a switchover only when go-redis hears of it",
					"sentinels", opt.SentinelAddrs, "err", lastErr, logthrottle.Held(held))
				warned = true
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// follow has rc, a client of the primary Redis Sentinels name
// (redis.NewFailoverClient), move to the primary they name now. It makes
// rc dial one connection, which it then closes: go-redis asks the
// Sentinels for the primary at each dial, and when the address is not the
// one it dialled last, it closes its connections to any other, as when it
// hears +switch-master. (go-redis offers no call to ask for that alone.)
func follow(ctx context.Context, rc *redis.Client) {
	ps := rc.Subscribe(ctx) // no channel: it dials on first use
	_ = ps.Ping(ctx)
	_ = ps.Close()
}
