package limiterd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/platform/backoff"
	"github.com/weirhq/weir/pkg/store/redisstore"
)

// openedClient is the go-redis client redisClient opened for --redis.
type openedClient struct {
	client redisstore.Client
	close  func() error
	// later, when not nil, is what the client needs done beside the
	// decisions while the limiter runs: for the one node named that did
	// not answer at start, finding out whether it is one of a Redis
	// Cluster's several primaries (checkSeedLater); for Redis Sentinels,
	// following the primary they name (followPrimary). The caller runs
	// it, and ends it through its context.
	later func(ctx context.Context)
}

// redisClient returns the go-redis client for --redis, tuned for a
// limiter (tune): a client of the primary Redis Sentinels watch for a URL
// with a master_name parameter, a Redis Cluster client for
// comma-separated nodes or a URL with addr parameters, else a client of
// one Redis. One address, or a
// URL without addr parameters, that names a node of a Redis Cluster of
// several primaries is taken as that cluster's seed (clusterSeed): a
// client of that node alone would see every key of the others' slots
// answered MOVED, and decide it by the failure mode. A node that does not
// answer at start gets a client of its own, and a later check
// (openedClient.checkLater) that logs an error if it turns out to be such
// a node.
func redisClient(addr string, tlsCfg *tls.Config, timeout time.Duration, log *slog.Logger) (openedClient, error) {
	if tlsCfg != nil && (strings.HasPrefix(addr, "redis://") || strings.HasPrefix(addr, "unix://")) {
		return openedClient{}, errors.New("limiterd: --redis-ca, --redis-cert and --redis-key need TLS: give --redis as rediss://… or host:port, not redis:// or unix://")
	}
	switch {
	case urlHas(addr, "master_name"):
		return newSentinelClient(addr, tlsCfg, timeout, log)
	case urlHas(addr, "addr"):
		return newClusterClient(addr, tlsCfg, timeout)
	case strings.Contains(addr, ","):
		opt := &redis.ClusterOptions{Addrs: strings.Split(addr, ","), TLSConfig: withTLS(nil, tlsCfg)}
		tuneCluster(opt, timeout)
		rc := redis.NewClusterClient(opt)
		return openedClient{client: rc, close: rc.Close}, nil
	}
	var opt *redis.Options
	if strings.Contains(addr, "://") {
		var err error
		if opt, err = redis.ParseURL(addr); err != nil {
			return openedClient{}, fmt.Errorf("limiterd: --redis: %w", err)
		}
	} else {
		opt = &redis.Options{Addr: addr}
	}
	opt.TLSConfig = withTLS(opt.TLSConfig, tlsCfg)
	tune(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout, &opt.MaxRetries, &opt.DialerRetries, &opt.ContextTimeoutEnabled, timeout)
	rc := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), scriptLoadTimeout)
	primaries, err := clusterSeed(ctx, rc)
	cancel()
	switch {
	case err != nil:
		// No answer yet: a client of the one node, checked when it
		// answers.
		return openedClient{client: rc, close: rc.Close, later: func(ctx context.Context) { checkSeedLater(ctx, rc, log) }}, nil
	case primaries < 2:
		// One Redis, or a cluster of one primary (all slots here:
		// batching works).
		return openedClient{client: rc, close: rc.Close}, nil
	}
	_ = rc.Close()
	log.Warn("--redis names one node of a Redis Cluster: using it as the cluster's seed; name several nodes, comma-separated, so that the limiter can start while this one is down",
		"node", opt.Addr, "primaries", primaries)
	if strings.Contains(addr, "://") {
		return newClusterClient(addr, tlsCfg, timeout)
	}
	copt := &redis.ClusterOptions{Addrs: []string{addr}, TLSConfig: opt.TLSConfig}
	tuneCluster(copt, timeout)
	cc := redis.NewClusterClient(copt)
	return openedClient{client: cc, close: cc.Close}, nil
}

// checkSeedLater asks the one node c is a client of, with growing waits
// (100ms to 10s) until it answers or ctx ends, whether it is one of a
// Redis Cluster's several primaries, and if so logs an error: the limiter
// started with a client of that node alone, which decides the keys of
// the other primaries' slots by their rules' failure mode until it is
// restarted.
func checkSeedLater(ctx context.Context, c *redis.Client, log *slog.Logger) {
	bo := backoff.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}
	for bo.Wait(ctx) {
		cctx, cancel := context.WithTimeout(ctx, scriptLoadTimeout)
		primaries, err := clusterSeed(cctx, c)
		cancel()
		if err != nil {
			continue
		}
		if primaries >= 2 {
			log.Error("--redis names one node of a Redis Cluster, which did not answer at start: the limiter uses it alone, and decides the keys of the other primaries' slots by their rules' failure mode; restart the limiter, and name several nodes, comma-separated",
				"node", c.Options().Addr, "primaries", primaries)
		}
		return
	}
}

// newClusterClient returns a Redis Cluster client for a redis:// URL,
// whose further nodes come in addr parameters, if any.
func newClusterClient(addr string, tlsCfg *tls.Config, timeout time.Duration) (openedClient, error) {
	opt, err := redis.ParseClusterURL(addr)
	if err != nil {
		return openedClient{}, fmt.Errorf("limiterd: --redis: %w", err)
	}
	opt.TLSConfig = withTLS(opt.TLSConfig, tlsCfg)
	tuneCluster(opt, timeout)
	rc := redis.NewClusterClient(opt)
	return openedClient{client: rc, close: rc.Close}, nil
}

// clusterSeed returns how many primaries hold the slots of the Redis
// Cluster whose node c is (its shards with slots; CLUSTER SHARDS, Redis
// 7.0): 0 when c's node runs without cluster mode.
func clusterSeed(ctx context.Context, c *redis.Client) (int, error) {
	info, err := c.Info(ctx, "cluster").Result()
	if err != nil {
		return 0, fmt.Errorf("limiterd: read INFO cluster: %w", err)
	}
	if !strings.Contains(info, "cluster_enabled:1") {
		return 0, nil
	}
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("limiterd: read CLUSTER SHARDS: %w", err)
	}
	primaries := 0
	for _, s := range shards {
		if len(s.Slots) > 0 {
			primaries++
		}
	}
	return primaries, nil
}

// tune sets go-redis timeouts for a limiter: short, no retries (a retry
// doubles the latency a dead Redis adds; the limiter's failure modes take
// over instead), and one dial per connection: a dead Redis Cluster primary
// refuses at once, where go-redis's five dials 100ms apart would hold the
// coalescer's merged calls, and with them decisions on healthy nodes.
func tune(dial, read, write, pool *time.Duration, retries, dials *int, ctxTimeout *bool, timeout time.Duration) {
	*dial = max(100*time.Millisecond, 5*timeout)
	*read, *write, *pool = timeout, timeout, timeout
	*retries, *dials = -1, 1
	*ctxTimeout = true
}

// tuneCluster tunes a Redis Cluster client as tune does, and has it
// re-send the commands of a pipeline that a node redirected (MOVED, ASK:
// a slot moving between primaries) at once: go-redis otherwise sleeps its
// retry backoff, 10 to 30 ms by default, before it follows a pipeline's
// redirects, as long as the store timeout's floor, where it follows a
// single command's without a pause.
func tuneCluster(opt *redis.ClusterOptions, timeout time.Duration) {
	tune(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout, &opt.MaxRetries, &opt.DialerRetries, &opt.ContextTimeoutEnabled, timeout)
	opt.MinRetryBackoff = -1 // go-redis: -1 is no backoff
}

// newSentinelClient returns a client of the primary that the Redis
// Sentinels of a redis:// URL with a master_name parameter watch (the
// URL's host and its addr parameters): go-redis asks them for the
// primary, and follows it when they fail it over; so does the client's
// later function (followPrimary), should go-redis not hear of it.
func newSentinelClient(addr string, tlsCfg *tls.Config, timeout time.Duration, log *slog.Logger) (openedClient, error) {
	opt, err := redis.ParseFailoverURL(addr)
	if err != nil {
		return openedClient{}, fmt.Errorf("limiterd: --redis: %w", err)
	}
	opt.TLSConfig = withTLS(opt.TLSConfig, tlsCfg)
	tune(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout, &opt.MaxRetries, &opt.DialerRetries, &opt.ContextTimeoutEnabled, timeout)
	rc := redis.NewFailoverClient(opt)
	return openedClient{client: rc, close: rc.Close, later: func(ctx context.Context) { followPrimary(ctx, rc, opt, log) }}, nil
}

// RedisACL is the least a Redis ACL user must be allowed for a limiter
// with the default key prefix: its keys (weir:*), the connection's own
// commands, the scripts' calls and loading, what the limiter reads of
// the server at start (INFO, CONFIG GET, CLUSTER SHARDS), and, on a Redis
// Cluster, the slot map go-redis reads (CLUSTER SLOTS): without it,
// every decision on a cluster fails. As the rules of ACL SETUSER, after
// the user's name, "on" and its password.
const RedisACL = "resetkeys ~weir:* resetchannels -@all +@connection +evalsha +eval +script|load +info +config|get +cluster|slots +cluster|shards " +
	"+get +set +del +pexpire +pttl +zadd +zcard +zcount +zrange +zrem +zremrangebyscore"

// RedisSentinelACL is what a Redis Sentinel's ACL user (Redis 6.2) is
// allowed for a limiter that asks it for the primary, as go-redis's
// client of the Sentinels uses it: the connection's own commands, the
// primary's address, the other Sentinels' (go-redis adds those it did
// not know to the ones it asks), and the channels on which the Sentinel
// announces a failover (go-redis then drops its connections to the old
// primary at once). Only the primary's address is indispensable: without
// the rest go-redis logs the refusal and keeps to the Sentinels named,
// and the limiter follows a new primary when it asks them for it, every
// second (followPrimary), or when its connections to the old one fail
// (as they do when it dies). As RedisACL's, after the user's name,
// "on" and its password; the user the limiter decides as is another, of
// the primary and its replicas (RedisACL).
const RedisSentinelACL = "resetchannels &+switch-master &+replica-reconf-done -@all +@connection +subscribe " +
	"+sentinel|get-master-addr-by-name +sentinel|sentinels"

// withTLS returns the TLS configuration of a Redis client: fromURL,
// what go-redis made of a rediss:// URL (nil for no TLS), when files is
// nil (no --redis-ca, --redis-cert or --redis-key); else files, which
// trusts the CA and presents the certificate, keeping the URL's server
// name and skip_verify. With neither set, crypto/tls checks each node's
// certificate against the host it dials.
func withTLS(fromURL, files *tls.Config) *tls.Config {
	if files == nil {
		return fromURL
	}
	cfg := files.Clone()
	if fromURL != nil {
		cfg.ServerName, cfg.InsecureSkipVerify = fromURL.ServerName, fromURL.InsecureSkipVerify
	}
	return cfg
}

// urlHas reports whether s is a URL with the query parameter name: a
// Redis URL with master_name names Redis Sentinels (go-redis's
// ParseFailoverURL); one with addr, without it, further Redis Cluster
// nodes (ParseClusterURL).
func urlHas(s, name string) bool {
	if !strings.Contains(s, "://") {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && u.Query().Has(name)
}
