package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/pkg/algorithm"
)

// Client is what the store needs of a go-redis client. The store runs its
// scripts with Process: EVALSHA commands it builds itself, whose replies
// are read straight into integers.
type Client interface {
	Process(ctx context.Context, cmd redis.Cmder) error
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

// ErrNoStruct is Load's error for a server whose Lua lacks the struct
// library the counter algorithms pack their states with.
var ErrNoStruct = errors.New("redisstore: the server's Lua lacks the struct library the counter algorithms need")

// ErrRedisTooOld is Load's error for a server older than Redis 6.0, which
// lacks the SET ... KEEPTTL the counter algorithms' writes use.
var ErrRedisTooOld = errors.New("redisstore: the server is older than Redis 6.0, and lacks the SET ... KEEPTTL the counter algorithms need")

// Config configures a Store. The zero value is usable.
type Config struct {
	// Prefix starts every key. Default "weir".
	Prefix string
	// ScriptPerRequest sends every request in a script call of its own,
	// even to one node, rather than up to 32 in a batch script: for a
	// proxy in front of Redis that routes a script call by its first key
	// alone (twemproxy, a sharding proxy), where a batch's other keys would
	// land on the wrong shard. Redis Cluster needs no setting (a cluster
	// client never batches), nor does a single node with cluster mode
	// enabled (its CROSSSLOT reply turns batching off).
	ScriptPerRequest bool
	// Now is the clock of the store's own waits (after a Redis Cluster
	// client failed to load its slot map, see Node). Default time.Now.
	Now func() time.Time
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
	//go:embed lua/batch.lua
	batchLoop string
	//go:embed lua/packed.lua
	packedLua string
)

// scriptParams are the parameters of every algorithm's script function
// (lua/batch.lua says what each is).
const scriptParams = "(key, mode, now, admittedAt, argv, first, out, o)"

// scriptSource is the script that runs one request of an algorithm whose
// script function has the body src, after prelude (the functions it
// calls, or ""): KEYS[1] the key, ARGV the mode, now ms, admittedAt ms
// and the algorithm's own arguments.
func scriptSource(prelude, src string) string {
	return prelude + "local function run" + scriptParams + "\n" + src + "\nend\n" +
		"local out = {}\n" +
		"run(KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV, 4, out, 1)\n" +
		"return out\n"
}

// batchSource is the script that runs the requests of several keys in one
// call (lua/batch.lua): each algorithm's script function under its letter
// in the table scripts, then the loop over the keys.
func batchSource() string {
	var b strings.Builder
	b.WriteString(packedLua)
	b.WriteString("local scripts = {}\n")
	for _, sc := range []struct{ letter, src string }{{"b", bucketLua}, {"f", fixedLua}, {"c", counterLua}, {"l", logLua}} {
		fmt.Fprintf(&b, "scripts['%s'] = function%s\n%s\nend\n", sc.letter, scriptParams, sc.src)
	}
	b.WriteString(batchLoop)
	return b.String()
}

// maxBatch bounds the requests of one batch script call: Redis runs a
// script to its end before anything else, and 32 decisions take it a
// few hundred microseconds at most.
const maxBatch = 32

type script struct {
	src, sha       string
	shaArg, srcArg any // sha and src, boxed once rather than for every call
	letterArg      any // its name in the batch script, boxed once
}

func newScript(src, letter string) script {
	sha := redis.NewScript(src).Hash()
	return script{src: src, sha: sha, shaArg: sha, srcArg: src, letterArg: letter}
}

// Store is a Redis-backed rate-limit store, safe for concurrent use.
type Store struct {
	c      Client
	prefix string
	// scripts by algorithm
	scripts [algorithm.SlidingWindowCounter + 1]script
	tags    [algorithm.SlidingWindowCounter + 1]string
	// batch runs several requests in one script call, for a client of
	// one node (batching); on Redis Cluster the keys of a call would
	// have to share a slot, so each request is a call of its own. A node
	// that refuses a batch's keys (CROSSSLOT: cluster mode on one node)
	// turns batching off for good.
	batch    script
	batching atomic.Bool
	now      func() time.Time
	// lookupFailed is the last failure of a cluster client to find a
	// key's node, until a lookup succeeds (see slotMapRetry).
	lookupFailed atomic.Pointer[lookupFailure]
	// callBufs holds *callBuf: the calls of a Decide or Refund, reused
	// (a call is a few hundred bytes, a batch of them the most the store
	// allocates per decision).
	callBufs sync.Pool
}

// callBuf holds the calls of one Decide or Refund.
type callBuf struct{ calls []call }

// maxPooledCalls bounds the calls a buffer keeps when it goes back to
// the pool (a call is about 340 bytes): a rare huge call does not pin its
// memory. The coalescer's batches are at most 256 by default.
const maxPooledCalls = 256

// takeCalls returns a buffer whose calls are empty, with room for n.
func (s *Store) takeCalls(n int) *callBuf {
	b, _ := s.callBufs.Get().(*callBuf)
	if b == nil {
		b = &callBuf{}
	}
	if cap(b.calls) < n {
		b.calls = make([]call, 0, n)
	}
	return b
}

// putCalls clears b's calls (they hold keys, replies and errors) and
// gives b back to the pool. Nothing may use them after: Decide and
// Refund put them back once every command has its reply, and the
// commands hold copies of their arguments.
func (s *Store) putCalls(b *callBuf) {
	if cap(b.calls) > maxPooledCalls {
		return
	}
	clear(b.calls)
	b.calls = b.calls[:0]
	s.callBufs.Put(b)
}

// New returns a store that keeps its states through c.
func New(c Client, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "weir"
	}
	_, single := c.(singleClient)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Store{c: c, prefix: cfg.Prefix, batch: newScript(batchSource(), ""), now: cfg.Now}
	s.batching.Store(single && !cfg.ScriptPerRequest)
	bucket := newScript(scriptSource(packedLua, bucketLua), "b")
	s.scripts[algorithm.TokenBucket] = bucket
	s.scripts[algorithm.LeakyBucket] = bucket
	s.scripts[algorithm.FixedWindow] = newScript(scriptSource(packedLua, fixedLua), "f")
	s.scripts[algorithm.SlidingWindowCounter] = newScript(scriptSource(packedLua, counterLua), "c")
	s.scripts[algorithm.SlidingWindowLog] = newScript(scriptSource("", logLua), "l")
	// The tags of the counter algorithms end in a layout version: their
	// states were hashes under "tb", "lb", "fw" and "sc", decimal strings
	// under "tb2", "lb2", "fw2" and "sc2", and are packed doubles since
	// version 3 (lua/packed.lua). A new name rather than one key in either
	// layout keeps limiters of both versions working side by side during
	// a rolling upgrade (each on its own keys). A version-3 key with no
	// state yet, whose state would last a minute or more, starts from its
	// version-2 key's, which has the same hash slot (lua/packed.lua); the
	// old keys expire through their TTLs.
	s.tags = [...]string{
		algorithm.TokenBucket:          "tb3",
		algorithm.LeakyBucket:          "lb3",
		algorithm.FixedWindow:          "fw3",
		algorithm.SlidingWindowLog:     "sl",
		algorithm.SlidingWindowCounter: "sc3",
	}
	return s, nil
}

// serverCheck is the script Load runs first: 0 for a server whose Lua
// lacks the struct library, 2 for one older than Redis 6.0 (its Lua has
// no redis.setresp, which came with 6.0 as SET's KEEPTTL did), 1 else.
// (rawget: Redis 7 fails a script that reads a global it lacks.)
const serverCheck = `if type(rawget(_G, 'struct')) ~= 'table' then return 0 end
if type(redis.setresp) ~= 'function' then return 2 end
return 1`

// Load loads every script into Redis ahead of use, after checking that
// the server can run them: that its Lua has the struct library the
// counter algorithms' states are packed with (lua/packed.lua; Redis has
// it since 2.6), and that it is Redis 6.0 or later, whose SET ... KEEPTTL
// the window counters' writes within a window use. So a server that
// cannot is reported once, by name, rather than by the error of every
// decision. Optional: a NOSCRIPT reply loads a script on demand.
func (s *Store) Load(ctx context.Context) error {
	check := redis.NewIntCmd(ctx, "eval", serverCheck, 0)
	if err := s.c.Process(ctx, check); err != nil {
		return fmt.Errorf("redisstore: check what the server's Lua offers: %w", err)
	}
	switch check.Val() {
	case 0:
		return ErrNoStruct
	case 2:
		return ErrRedisTooOld
	}
	for _, a := range algorithm.All {
		sc := s.scripts[a]
		if err := s.c.ScriptLoad(ctx, sc.src).Err(); err != nil {
			return fmt.Errorf("redisstore: load %s script: %w", a, err)
		}
	}
	if s.batching.Load() {
		if err := s.c.ScriptLoad(ctx, s.batch.src).Err(); err != nil {
			return fmt.Errorf("redisstore: load the batch script: %w", err)
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
	return string(s.appendKey(nil, r))
}

// appendKey appends the Redis key of r to b.
func (s *Store) appendKey(b []byte, r algorithm.Request) []byte {
	b = append(append(b, s.prefix...), ":{"...)
	if k := r.Key; strings.ContainsAny(k, "{}%") {
		b = append(b, keyEscaper.Replace(k)...)
	} else {
		b = append(b, k...)
	}
	return append(append(b, "}:"...), s.tags[r.Params.Algorithm]...)
}

var keyEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// call is one script invocation prepared for a request: its EVALSHA
// arguments, kept in the call rather than in a slice of their own.
type call struct {
	req  int // the request's index
	sc   *script
	p    algorithm.Params
	argv [14]any
	argc int
	eval bool // the node lacked the script: send its source (EVAL)
	// The reply of the last command sent, or its error.
	vals []int64
	err  error
}

// Script modes, the first argument of every script.
const (
	modeDecide = "d"
	modeRefund = "r"
)

// ownArgs is where a call's arguments of its algorithm's own begin in
// call.argv: after the command, the script, the key count, the key, and
// the arguments every script takes (mode, now, admittedAt), which a batch
// sends once.
const ownArgs = 7

// prepare fills c for r, whose Redis key is key, at now and at. Boxing a
// number in an interface allocates, so now and at come boxed, once for a
// batch, and so do the parameters when prev, the call before c, has the
// same: a batch mostly holds requests of a few rules.
func (s *Store) prepare(c, prev *call, r algorithm.Request, key string, refund bool, now, at any) {
	p := r.Params
	c.sc, c.p = &s.scripts[p.Algorithm], p
	c.argv[0], c.argv[1], c.argv[2], c.argv[3] = "evalsha", c.sc.shaArg, 1, key
	c.argv[4] = modeDecide // a constant: boxed without allocating
	if refund {
		c.argv[4] = modeRefund
	}
	c.argv[5], c.argv[6] = now, at
	n := ownArgs + 2
	if p.Algorithm.IsBucket() {
		n++
	}
	if prev != nil && prev.p == p {
		copy(c.argv[ownArgs:n], prev.argv[ownArgs:n])
	} else {
		c.argv[ownArgs], c.argv[ownArgs+1] = p.Window.Milliseconds(), p.Limit
		if p.Calendar == algorithm.Month {
			c.argv[ownArgs] = 0 // the script places the window from the bounds below
		}
		if p.Algorithm.IsBucket() {
			c.argv[ownArgs+2] = p.Capacity()
		}
	}
	c.argv[n] = p.ClampCost(r.Cost)
	c.argc = n + 1
	if p.Algorithm == algorithm.FixedWindow {
		c.argv[c.argc] = "0"
		if p.CountRejected {
			c.argv[c.argc] = "1"
		}
		c.argc++
		if p.Calendar == algorithm.Month {
			// Lua has no calendar: the window holding now, and the start
			// of the one holding at (a refund's admission).
			start, end := p.WindowBounds(time.UnixMilli(now.(int64)))
			atStart, _ := p.WindowBounds(time.UnixMilli(at.(int64)))
			c.argv[c.argc], c.argv[c.argc+1], c.argv[c.argc+2] = start.UnixMilli(), end.UnixMilli(), atStart.UnixMilli()
			c.argc += 3
		}
	}
}

// key returns the Redis key of c.
func (c *call) key() string { return c.argv[3].(string) }

// withSource makes c's next command an EVAL of the script's source rather
// than an EVALSHA: for a node that does not have the script (NOSCRIPT).
// EVAL is routed by its key like EVALSHA, so on Redis Cluster it reaches,
// and leaves the script cached on, the node that lacked it.
func (c *call) withSource() {
	c.argv[0], c.argv[1], c.eval = "eval", c.sc.srcArg, true
}

// scriptCmd is a script call (EVALSHA or EVAL) that go-redis never sends
// twice. A decision changes its counter, and a call that timed out or
// lost its connection may have run: sending it again would count its
// hits twice, and add work to a Redis already too slow. go-redis re-sends
// a failed command on Redis Cluster (the attempts its MaxRedirects
// allows, a pipeline's included) whatever MaxRetries says, unless the
// command reports NoRetry. Redirections (MOVED, ASK), which a node
// answers without running the script, are still followed; the limiter's
// failure modes take a call that fails.
type scriptCmd struct{ *redis.IntSliceCmd }

// NoRetry tells go-redis not to send the command again after a failure.
func (scriptCmd) NoRetry() bool { return true }

// newScriptCmd returns a script call of args, whose key is args[3].
func newScriptCmd(ctx context.Context, args ...any) scriptCmd {
	cmd := redis.NewIntSliceCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	return scriptCmd{cmd}
}

// command returns a new EVALSHA (or EVAL) command for c alone.
func (c *call) command(ctx context.Context) scriptCmd {
	// A copy: c goes back to the store's pool after the call, and a
	// client's hook may keep the command and its arguments.
	return newScriptCmd(ctx, slices.Clone(c.argv[:c.argc])...)
}

// batchCommand returns one command of the batch script for the calls at
// the indices: EVAL of its source if any of them met a node without a
// script.
func (s *Store) batchCommand(ctx context.Context, calls []call, idx []int) scriptCmd {
	// same[j]: call idx[j] goes as sameAsBefore (a batch is at most
	// maxBatch calls).
	var same [maxBatch]bool
	n := 3 + len(idx) + ownArgs - 4
	for j, i := range idx {
		if same[j] = j > 0 && sameArgs(&calls[idx[j-1]], &calls[i]); same[j] {
			n++
		} else {
			n += 2 + calls[i].argc - ownArgs
		}
	}
	args := make([]any, 0, n)
	args = append(args, "evalsha", s.batch.shaArg, len(idx))
	for _, i := range idx {
		if calls[i].eval {
			args[0], args[1] = "eval", s.batch.srcArg
		}
		args = append(args, calls[i].argv[3]) // the key
	}
	// Every call of a batch is of one Decide or Refund: one mode, now and
	// admittedAt.
	args = append(args, calls[idx[0]].argv[4:ownArgs]...)
	for j, i := range idx {
		c := &calls[i]
		if same[j] {
			args = append(args, sameAsBefore)
			continue
		}
		args = append(append(args, c.sc.letterArg, c.argc-ownArgs), c.argv[ownArgs:c.argc]...)
	}
	return newScriptCmd(ctx, args...)
}

// sameAsBefore stands, in a batch command, for the script and arguments
// of the request before (lua/batch.lua).
const sameAsBefore = "="

// sameArgs reports whether c runs the script of prev with the same
// arguments of its algorithm's own.
func sameArgs(prev, c *call) bool {
	if prev.sc != c.sc || prev.argc != c.argc {
		return false
	}
	for k := ownArgs; k < c.argc; k++ {
		if prev.argv[k] != c.argv[k] {
			return false
		}
	}
	return true
}

// errFailedInBatch marks a call whose script failed within a batch: it is
// sent again on its own, for its error.
var errFailedInBatch = errors.New("redisstore: the script failed within a batch")

// takeBatch gives each call at the indices its part of a batch command's
// reply, vals, or the command's error.
func takeBatch(calls []call, idx []int, vals []int64, err error) {
	for _, i := range idx {
		c := &calls[i]
		switch {
		case err != nil:
			c.vals, c.err = nil, err
		case len(vals) > 0 && vals[0] == -1:
			c.vals, c.err = nil, errFailedInBatch
			vals = vals[1:]
		case len(vals) == 0 || vals[0] < 0 || vals[0] > int64(len(vals)-1):
			c.vals, c.err = nil, fmt.Errorf("%w: a batch reply ends early", ErrReply)
		default:
			n := vals[0]
			c.vals, c.err = vals[1:1+n:1+n], nil
			vals = vals[1+n:]
		}
	}
}

// prepareAll prepares a call for each of reqs that validates, in b,
// leaving out refunds of nothing (cost 0). It stores the error of each
// other in out, if not nil, and returns the first.
func (s *Store) prepareAll(b *callBuf, reqs []algorithm.Request, out []algorithm.Result, refund bool, now, at int64) ([]call, error) {
	var first error
	calls := b.calls[:0] // room for every request: append does not reallocate
	// The keys are cut from one string: one allocation for all of them.
	n := 0
	for _, r := range reqs {
		n += len(s.prefix) + len(r.Key) + 8
	}
	buf := make([]byte, 0, n)
	ends := make([]int, 0, len(reqs))
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			first = firstErr(first, err)
			if out != nil {
				out[i].Err = err
			}
			continue
		}
		if refund && r.Cost <= 0 {
			continue
		}
		buf = s.appendKey(buf, r)
		ends = append(ends, len(buf))
		calls = append(calls, call{req: i})
	}
	keys, start := string(buf), 0
	var nowArg, atArg any = now, at
	for j := range calls {
		c := &calls[j]
		var prev *call
		if j > 0 {
			prev = &calls[j-1]
		}
		s.prepare(c, prev, reqs[c.req], keys[start:ends[j]], refund, nowArg, atArg)
		start = ends[j]
	}
	b.calls = calls // for putCalls to clear
	return calls, first
}

// Decide decides every request at now in one round trip: one EVALSHA; for
// several requests on one node, a batch script call for every 32 (a
// pipeline of them past 32); on Redis Cluster, a pipeline of EVALSHAs per
// node, in parallel. The error is non-nil only when no request could be
// sent (for example, ctx is done); errors of single requests, including a
// request that does not validate, are in their Results. A request Redis
// could not decide has an error that wraps a *NodeError naming the node
// that failed it, so a caller can tell a dead node from a dead store. Each
// request's script is atomic, and so is each batch script call; the call
// as a whole is not.
func (s *Store) Decide(ctx context.Context, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error) {
	out := make([]algorithm.Result, len(reqs))
	b := s.takeCalls(len(reqs))
	defer s.putCalls(b)
	calls, _ := s.prepareAll(b, reqs, out, false, now.UnixMilli(), 0)
	if len(calls) == 0 {
		return out, nil
	}
	if err := s.run(ctx, calls); err != nil {
		return nil, err
	}
	fail := failures{s: s}
	for j := range calls {
		c := &calls[j]
		if c.err != nil {
			out[c.req].Err = fail.wrap(ctx, c, c.err)
			continue
		}
		out[c.req].Decision, out[c.req].Err = describe(reqs[c.req], now, c.vals)
	}
	return out, nil
}

// Refund gives back the cost of requests admitted at time at, in one round
// trip (see algorithm.Refund). It returns the first error met. Callers
// should pass a context that outlives a client's hang-up
// (context.WithoutCancel): a refund cut short leaves quota spent.
func (s *Store) Refund(ctx context.Context, at, now time.Time, reqs []algorithm.Request) error {
	b := s.takeCalls(len(reqs))
	defer s.putCalls(b)
	calls, first := s.prepareAll(b, reqs, nil, true, now.UnixMilli(), at.UnixMilli())
	if len(calls) == 0 {
		return first
	}
	if err := s.run(ctx, calls); err != nil {
		return err
	}
	fail := failures{s: s}
	for j := range calls {
		if err := calls[j].err; err != nil {
			first = firstErr(first, fail.wrap(ctx, &calls[j], err))
		}
	}
	return first
}

func firstErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// run sends calls in one round trip, and more only for calls that need
// them: one for those whose script Redis did not have, one for those a
// batch script could not run (whose script failed within it, or whose
// keys a node refused together), sent alone. Each call then holds its
// reply. On Redis Cluster the round trip is one pipeline per node, sent in
// parallel by the client, which follows MOVED and ASK redirections. Only
// the first round trip can fail the whole call: once Redis may have
// applied some requests, each call keeps its own error.
func (s *Store) run(ctx context.Context, calls []call) error {
	batch := s.batching.Load()
	if err := s.send(ctx, calls, nil, batch); err != nil {
		return err
	}
	var retry []int
	for i := range calls {
		if isNoScript(calls[i].err) {
			calls[i].withSource()
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		_ = s.send(ctx, calls, retry, batch)
	}
	var alone []int
	for i := range calls {
		switch {
		case calls[i].err == errFailedInBatch:
		case batch && isCrossSlot(calls[i].err):
			s.batching.Store(false)
		default:
			continue
		}
		// Alone, the request's own script may be missing from the node
		// (the batch script stood in for it): send its source.
		calls[i].withSource()
		alone = append(alone, i)
	}
	if len(alone) > 0 {
		_ = s.send(ctx, calls, alone, false)
	}
	return nil
}

// send sends the calls (or those at the indices only, when not nil): with
// batch, in batch script calls; else a command each (sendGroup). On
// Redis Cluster, the commands are grouped by the primary of their slot and
// each group is sent on its own, all groups at once: a group whose node is
// dead or slow then fails alone, where one cluster pipeline would stamp
// its error on every command once the context ends. send returns an error
// only when ctx ended before any command had a reply; other errors are in
// the commands.
func (s *Store) send(ctx context.Context, calls []call, only []int, batch bool) error {
	if only == nil {
		only = make([]int, len(calls))
		for i := range only {
			only[i] = i
		}
	}
	if cc, ok := s.c.(clusterClient); ok && len(only) > 1 {
		if groups := byNode(ctx, cc, calls, only); len(groups) > 1 {
			var wg sync.WaitGroup
			for _, g := range groups {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.sendGroup(ctx, calls, g, batch)
				}()
			}
			wg.Wait()
			return whole(ctx, calls, only)
		}
	}
	s.sendGroup(ctx, calls, only, batch)
	return whole(ctx, calls, only)
}

// byNode groups the indices of calls by the primary of their key in the
// client's slot map; a key whose node is unknown goes with the first.
func byNode(ctx context.Context, cc clusterClient, calls []call, only []int) [][]int {
	var nodes []*redis.Client
	var groups [][]int
	for _, i := range only {
		n, _ := cc.MasterForKey(ctx, calls[i].key())
		g := slices.Index(nodes, n)
		if g < 0 {
			g = len(nodes)
			nodes, groups = append(nodes, n), append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// sendGroup sends the calls at the indices in one round trip and gives
// each its reply: with batch, one batch command for every maxBatch calls;
// else a command each. Several commands go in one pipeline.
func (s *Store) sendGroup(ctx context.Context, calls []call, idx []int, batch bool) {
	if len(idx) == 1 {
		c := &calls[idx[0]]
		cmd := c.command(ctx)
		_ = s.c.Process(ctx, cmd)
		c.vals, c.err = cmd.Result()
		return
	}
	// Each command serves a run of the calls: one, or with batch up to
	// maxBatch in a batch script.
	size := 1
	if batch {
		size = maxBatch
	}
	runs := slices.Collect(slices.Chunk(idx, size))
	cmds := make([]scriptCmd, len(runs))
	for j, run := range runs {
		if len(run) == 1 {
			cmds[j] = calls[run[0]].command(ctx)
		} else {
			cmds[j] = s.batchCommand(ctx, calls, run)
		}
	}
	if len(cmds) == 1 {
		_ = s.c.Process(ctx, cmds[0])
	} else {
		pipe := s.c.Pipeline()
		for _, cmd := range cmds {
			_ = pipe.Process(ctx, cmd)
		}
		_, _ = pipe.Exec(ctx)
	}
	for j, run := range runs {
		vals, err := cmds[j].Result()
		if len(run) == 1 {
			calls[run[0]].vals, calls[run[0]].err = vals, err
		} else {
			takeBatch(calls, run, vals, err)
		}
	}
}

// whole returns the error of a call none of whose commands had a reply
// because ctx ended.
func whole(ctx context.Context, calls []call, idx []int) error {
	if ctx.Err() == nil {
		return nil
	}
	var first error
	for _, i := range idx {
		err := calls[i].err
		if err == nil {
			return nil
		}
		first = firstErr(first, err)
	}
	return fmt.Errorf("redisstore: %w", first)
}

func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

func isCrossSlot(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "CROSSSLOT")
}

// replyError wraps the error of a script's command: a reply that is not a
// list of integers wraps ErrReply.
func replyError(err error) error {
	if badShape(err) {
		return fmt.Errorf("%w: %w", ErrReply, err)
	}
	return fmt.Errorf("redisstore: %w", err)
}

// badShape reports whether err says a reply could not be read as integers.
func badShape(err error) bool {
	var num *strconv.NumError
	return errors.As(err, &num) || strings.HasPrefix(err.Error(), "redis: can't parse")
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
