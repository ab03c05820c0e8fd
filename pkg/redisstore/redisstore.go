package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/pkg/algorithm"
)

// Client is what the store needs of a go-redis client.
type Client interface {
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
	ScriptLoad(ctx context.Context, script string) *redis.StringCmd
	Pipeline() redis.Pipeliner
	Ping(ctx context.Context) *redis.StatusCmd
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = (*redis.Ring)(nil)
)

// ErrReply is wrapped by errors about a Redis reply of an unexpected shape.
var ErrReply = errors.New("redisstore: unexpected reply")

// Config configures a Store. The zero value is usable.
type Config struct {
	// Prefix starts every key. Default "weir".
	Prefix string
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if strings.ContainsAny(c.Prefix, "{} \t\r\n") {
		return fmt.Errorf("redisstore: prefix %q must not contain braces or whitespace", c.Prefix)
	}
	return nil
}

var (
	//go:embed lua/bucket.lua
	bucketLua string
	//go:embed lua/fixed.lua
	fixedLua string
	//go:embed lua/counter.lua
	counterLua string
	//go:embed lua/log.lua
	logLua string
)

type script struct {
	src, sha string
}

func newScript(src string) script { return script{src: src, sha: redis.NewScript(src).Hash()} }

// Store is a Redis-backed rate-limit store, safe for concurrent use.
type Store struct {
	c      Client
	prefix string
	// scripts by algorithm
	scripts [algorithm.SlidingWindowCounter + 1]script
	tags    [algorithm.SlidingWindowCounter + 1]string
}

// New returns a store that keeps its states through c.
func New(c Client, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "weir"
	}
	s := &Store{c: c, prefix: cfg.Prefix}
	bucket := newScript(bucketLua)
	s.scripts[algorithm.TokenBucket] = bucket
	s.scripts[algorithm.LeakyBucket] = bucket
	s.scripts[algorithm.FixedWindow] = newScript(fixedLua)
	s.scripts[algorithm.SlidingWindowCounter] = newScript(counterLua)
	s.scripts[algorithm.SlidingWindowLog] = newScript(logLua)
	s.tags = [...]string{
		algorithm.TokenBucket:          "tb",
		algorithm.LeakyBucket:          "lb",
		algorithm.FixedWindow:          "fw",
		algorithm.SlidingWindowLog:     "sl",
		algorithm.SlidingWindowCounter: "sc",
	}
	return s, nil
}

// Load loads every script into Redis ahead of use. Optional: a NOSCRIPT
// reply loads the script on demand.
func (s *Store) Load(ctx context.Context) error {
	for _, a := range algorithm.All {
		sc := s.scripts[a]
		if err := s.c.ScriptLoad(ctx, sc.src).Err(); err != nil {
			return fmt.Errorf("redisstore: load %s script: %w", a, err)
		}
	}
	return nil
}

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisstore: ping: %w", err)
	}
	return nil
}

// RedisKey returns the Redis key holding the state of r. Braces and percent
// signs in r.Key are percent-escaped, so the hash tag is always the whole
// key.
func (s *Store) RedisKey(r algorithm.Request) string {
	k := r.Key
	if strings.ContainsAny(k, "{}%") {
		k = keyEscaper.Replace(k)
	}
	return s.prefix + ":{" + k + "}:" + s.tags[r.Params.Algorithm]
}

var keyEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// call is one script invocation prepared for a request.
type call struct {
	sc   script
	keys []string
	args []any
}

func (s *Store) prepare(r algorithm.Request, mode string, now, at int64) call {
	p := r.Params
	w := p.Window.Milliseconds()
	cost := p.ClampCost(r.Cost)
	c := call{sc: s.scripts[p.Algorithm], keys: []string{s.RedisKey(r)}}
	if p.Algorithm.IsBucket() {
		c.args = []any{mode, now, w, p.Limit, p.Capacity(), cost, at}
	} else {
		c.args = []any{mode, now, w, p.Limit, cost, at}
	}
	return c
}

// Decide decides every request at now in one round trip: one EVALSHA, or a
// pipeline of them for several requests. The error is non-nil only when no
// request could be sent (for example, ctx is done); errors of single
// requests, including a request that does not validate, are in their
// Results. Each script is atomic; the batch as a whole is not.
func (s *Store) Decide(ctx context.Context, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error) {
	t := now.UnixMilli()
	out := make([]algorithm.Result, len(reqs))
	calls := make([]call, 0, len(reqs))
	idx := make([]int, 0, len(reqs))
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			out[i].Err = err
			continue
		}
		calls = append(calls, s.prepare(r, "d", t, 0))
		idx = append(idx, i)
	}
	if len(calls) == 0 {
		return out, nil
	}
	replies, err := s.run(ctx, calls)
	if err != nil {
		return nil, err
	}
	for j, rep := range replies {
		i := idx[j]
		if rep.err != nil {
			out[i].Err = rep.err
			continue
		}
		out[i].Decision, out[i].Err = describe(reqs[i], now, rep.vals)
	}
	return out, nil
}

// Refund gives back the cost of requests admitted at time at, in one round
// trip (see algorithm.Refund). It returns the first error met. Callers
// should pass a context that outlives a client's hang-up
// (context.WithoutCancel): a refund cut short leaves quota spent.
func (s *Store) Refund(ctx context.Context, at, now time.Time, reqs []algorithm.Request) error {
	t, a := now.UnixMilli(), at.UnixMilli()
	calls := make([]call, 0, len(reqs))
	var first error
	for _, r := range reqs {
		if err := r.Validate(); err != nil {
			first = firstErr(first, err)
			continue
		}
		if r.Cost > 0 {
			calls = append(calls, s.prepare(r, "r", t, a))
		}
	}
	if len(calls) == 0 {
		return first
	}
	replies, err := s.run(ctx, calls)
	if err != nil {
		return err
	}
	for _, rep := range replies {
		first = firstErr(first, rep.err)
	}
	return first
}

func firstErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

type reply struct {
	vals []int64
	err  error
}

// run sends calls in one round trip, and one more for those whose script
// Redis did not have.
func (s *Store) run(ctx context.Context, calls []call) ([]reply, error) {
	out := make([]reply, len(calls))
	if len(calls) == 1 {
		c := calls[0]
		v, err := s.c.EvalSha(ctx, c.sc.sha, c.keys, c.args...).Result()
		if isNoScript(err) {
			if err = s.c.ScriptLoad(ctx, c.sc.src).Err(); err == nil {
				v, err = s.c.EvalSha(ctx, c.sc.sha, c.keys, c.args...).Result()
			}
		}
		if err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("redisstore: %w", err)
		}
		out[0] = parse(v, err)
		return out, nil
	}
	cmds, err := s.pipeline(ctx, calls)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	var retry []int
	for i, cmd := range cmds {
		if isNoScript(cmd.Err()) {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		loaded := map[string]bool{}
		again := make([]call, len(retry))
		for j, i := range retry {
			again[j] = calls[i]
			if sc := calls[i].sc; !loaded[sc.sha] {
				loaded[sc.sha] = true
				if err := s.c.ScriptLoad(ctx, sc.src).Err(); err != nil {
					return nil, fmt.Errorf("redisstore: load script: %w", err)
				}
			}
		}
		cmds2, _ := s.pipeline(ctx, again)
		for j, i := range retry {
			cmds[i] = cmds2[j]
		}
	}
	for i, cmd := range cmds {
		out[i] = parse(cmd.Result())
	}
	return out, nil
}

func (s *Store) pipeline(ctx context.Context, calls []call) ([]*redis.Cmd, error) {
	pipe := s.c.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = pipe.EvalSha(ctx, c.sc.sha, c.keys, c.args...)
	}
	_, err := pipe.Exec(ctx)
	return cmds, err
}

func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// parse turns a script's reply into integers.
func parse(v any, err error) reply {
	if err != nil {
		return reply{err: fmt.Errorf("redisstore: %w", err)}
	}
	arr, ok := v.([]any)
	if !ok {
		return reply{err: fmt.Errorf("%w: %T", ErrReply, v)}
	}
	vals := make([]int64, len(arr))
	for i, x := range arr {
		switch n := x.(type) {
		case int64:
			vals[i] = n
		case string: // RESP3 may deliver numbers as strings in some proxies
			p, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return reply{err: fmt.Errorf("%w: element %d is %q", ErrReply, i, n)}
			}
			vals[i] = p
		default:
			return reply{err: fmt.Errorf("%w: element %d is %T", ErrReply, i, x)}
		}
	}
	return reply{vals: vals}
}

// describe builds the decision from a decide script's reply.
func describe(r algorithm.Request, now time.Time, v []int64) (algorithm.Decision, error) {
	p := r.Params
	cost := p.ClampCost(r.Cost)
	want := 3
	if p.Algorithm == algorithm.SlidingWindowCounter || p.Algorithm == algorithm.SlidingWindowLog {
		want = 4
	}
	if len(v) != want {
		return algorithm.Decision{}, fmt.Errorf("%w: %d values for %s, want %d", ErrReply, len(v), p.Algorithm, want)
	}
	allowed := v[0] == 1
	switch p.Algorithm {
	case algorithm.TokenBucket, algorithm.LeakyBucket:
		return algorithm.Describe(p, algorithm.State{Level: v[1], Last: v[2]}, now, cost, allowed), nil
	case algorithm.FixedWindow:
		return algorithm.Describe(p, algorithm.State{Window: v[1], Count: v[2]}, now, cost, allowed), nil
	case algorithm.SlidingWindowCounter:
		return algorithm.Describe(p, algorithm.State{Window: v[1], Count: v[2], Prev: v[3]}, now, cost, allowed), nil
	default:
		return algorithm.DescribeLog(p, algorithm.LogView{Count: v[1], Newest: v[2], Kth: v[3]}, now, cost, allowed), nil
	}
}
