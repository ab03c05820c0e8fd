package usage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Defaults for the zero fields of ReporterConfig.
const (
	DefaultInterval        = time.Second
	DefaultMaxMessageBytes = 512 << 10
	DefaultBufferReports   = 120
	DefaultPublishTimeout  = 5 * time.Second
	DefaultMinBackoff      = 100 * time.Millisecond
	DefaultMaxBackoff      = 5 * time.Second
	DefaultShutdownTimeout = 2 * time.Second
	DefaultMaxReadings     = 1000
)

// ReadsBetween: ReporterConfig's zero value reads nothing between interval
// reports; limiterd reads DefaultReadsBetween times (docs/architecture.md,
// "Readings between intervals", gives what each count measured).
const (
	DefaultReadsBetween = 3
	MaxReadsBetween     = 9
)

// MinMessageBytes is the smallest ReporterConfig.MaxMessageBytes: room for
// a rule with a key of algorithm.MaxKeyLen bytes.
const MinMessageBytes = 16 << 10

// maxBatch is the most messages one Publish call carries.
const maxBatch = 16

// ErrStarted is returned by a second call of Reporter.Run.
var ErrStarted = errors.New("usage: reporter already started")

// ReporterConfig configures a Reporter. DC, Source and Publisher are
// required; the rest have defaults.
type ReporterConfig struct {
	// DC names this limiter's datacenter. Required.
	DC string
	// Instance names this limiter process. Default NewInstanceID(DC).
	Instance string
	// Source gives each interval's usage: the Aggregator. Required.
	Source Flusher
	// Publisher sends the reports. Required.
	Publisher Publisher
	// Progress gives the assignment epoch and revision applied; nil
	// reports 0 for both.
	Progress Progress
	// Meter, if set, reads what the DC consumed of each rule and key the
	// report carries, after the applied revision is taken, so that a
	// reading is never older than the revision it comes with. nil: the
	// reports carry no readings.
	Meter Meter
	// Changed, if set with Meter, hands over the entries whose limits the
	// DC's documents changed; each is read in every report for
	// ChangedReads, traffic or not, with the entries read as holding quota
	// (holding.go), and kept while it holds quota. nil: entries are read
	// as traffic brings them, and while they hold quota.
	Changed Changed
	// ReadsBetween, with Meter, is how many times between two interval
	// reports, evenly spaced, the entries the DC holds quota of while quiet
	// are read and their readings sent alone (between): what they free as
	// their admissions age reaches the DCs that want it that much sooner.
	// 0 (the zero value): none; at most MaxReadsBetween. limiterd uses
	// DefaultReadsBetween.
	ReadsBetween int
	// MaxReadings bounds the Meter calls of one report; the entries past
	// it go without a reading (the coordinator then counts what they were
	// granted). Each report's readings also stop at half the interval.
	// Default DefaultMaxReadings (1000).
	MaxReadings int
	// Interval is the reporting interval, a whole number of milliseconds
	// of at least 10ms. Reports cover the intervals that start at
	// multiples of it (Unix time). Default DefaultInterval (1s).
	Interval time.Duration
	// MaxMessageBytes bounds a marshalled report; larger ones are split.
	// At least MinMessageBytes. Default DefaultMaxMessageBytes (512 KiB).
	MaxMessageBytes int
	// BufferReports is how many messages may wait for the Publisher; when
	// it is full the oldest is dropped. Default DefaultBufferReports (120:
	// two minutes of one message a second).
	BufferReports int
	// PublishTimeout bounds each Publish call. Default
	// DefaultPublishTimeout (5s).
	PublishTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before retrying a failed
	// Publish, which doubles from MinBackoff up to MaxBackoff, with jitter.
	// Defaults DefaultMinBackoff (100ms) and DefaultMaxBackoff (5s).
	MinBackoff, MaxBackoff time.Duration
	// ShutdownTimeout bounds how long Run, once its context is done, tries
	// to publish the last reports. Default DefaultShutdownTimeout (2s).
	ShutdownTimeout time.Duration
	// Clock tells the time and waits. Default: the system clock.
	Clock Clock
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Validate reports whether c is usable.
func (c ReporterConfig) Validate() error {
	switch {
	case c.DC == "" || !utf8.ValidString(c.DC):
		return errors.New("usage: ReporterConfig.DC is required, in UTF-8")
	case !utf8.ValidString(c.Instance):
		return errors.New("usage: ReporterConfig.Instance is not UTF-8")
	case c.Source == nil:
		return errors.New("usage: ReporterConfig.Source is required")
	case c.Publisher == nil:
		return errors.New("usage: ReporterConfig.Publisher is required")
	case c.Interval != 0 && (c.Interval < 10*time.Millisecond || c.Interval%time.Millisecond != 0):
		return fmt.Errorf("usage: Interval %v is not a whole number of milliseconds of at least 10ms", c.Interval)
	case c.MaxMessageBytes != 0 && c.MaxMessageBytes < MinMessageBytes:
		return fmt.Errorf("usage: MaxMessageBytes %d is under %d", c.MaxMessageBytes, MinMessageBytes)
	case c.MaxReadings < 0:
		return fmt.Errorf("usage: negative MaxReadings %d", c.MaxReadings)
	case c.ReadsBetween < 0 || c.ReadsBetween > MaxReadsBetween:
		return fmt.Errorf("usage: ReadsBetween %d, want 0 to %d", c.ReadsBetween, MaxReadsBetween)
	case c.BufferReports < 0:
		return fmt.Errorf("usage: negative BufferReports %d", c.BufferReports)
	case c.PublishTimeout < 0 || c.MinBackoff < 0 || c.MaxBackoff < 0 || c.ShutdownTimeout < 0:
		return errors.New("usage: negative PublishTimeout, MinBackoff, MaxBackoff or ShutdownTimeout")
	case c.MinBackoff > 0 && c.MaxBackoff > 0 && c.MinBackoff > c.MaxBackoff:
		return fmt.Errorf("usage: MinBackoff %v exceeds MaxBackoff %v", c.MinBackoff, c.MaxBackoff)
	}
	return nil
}

// Reporter publishes an instance's usage reports: every interval it
// flushes its Source into a weir.v1.UsageReport (split into several
// messages if large), even with no rule in it since the report is also the
// DC's sign of life, and queues the messages for a sender goroutine that
// publishes them in order, retrying with backoff. Nothing it does blocks
// the Source's writers: a Publisher that fails or hangs only fills the
// bounded buffer, whose oldest messages are then dropped and counted.
//
// Create it with NewReporter and start it with Run, once. Stats, Dropped
// and the prometheus.Collector methods are safe for concurrent use.
type Reporter struct {
	cfg   ReporterConfig
	clock Clock
	log   *slog.Logger
	key   []byte // the message key: the instance

	started atomic.Bool
	seq     uint64  // the last sequence assigned; owned by Run
	held    holding // entries to read while quiet; owned by Run
	owed    int     // the reports a changed entry is read in: ChangedReads in intervals, rounded up
	lastSeq atomic.Uint64

	mu      sync.Mutex
	ring    []Message // the buffer: n messages from head, wrapping
	head, n int
	dropped uint64
	wake    chan struct{}

	sent, publishErrors atomic.Uint64

	descSent, descDropped, descBuffered, descErrors *prometheus.Desc
}

var _ prometheus.Collector = (*Reporter)(nil)

// NewReporter returns a Reporter; start it with Run.
func NewReporter(cfg ReporterConfig) (*Reporter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Instance == "" {
		cfg.Instance = NewInstanceID(cfg.DC)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.Interval, DefaultInterval)
	def(&cfg.PublishTimeout, DefaultPublishTimeout)
	def(&cfg.MinBackoff, DefaultMinBackoff)
	def(&cfg.MaxBackoff, DefaultMaxBackoff)
	def(&cfg.ShutdownTimeout, DefaultShutdownTimeout)
	if cfg.MinBackoff > cfg.MaxBackoff {
		return nil, fmt.Errorf("usage: MinBackoff %v exceeds MaxBackoff %v", cfg.MinBackoff, cfg.MaxBackoff)
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.MaxReadings == 0 {
		cfg.MaxReadings = DefaultMaxReadings
	}
	if cfg.BufferReports == 0 {
		cfg.BufferReports = DefaultBufferReports
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Reporter{
		cfg:          cfg,
		held:         holding{max: cfg.MaxReadings},
		owed:         int((ChangedReads + cfg.Interval - 1) / cfg.Interval),
		clock:        cfg.Clock,
		log:          cfg.Logger.With("dc", cfg.DC, "instance", cfg.Instance),
		key:          []byte(cfg.Instance),
		ring:         make([]Message, cfg.BufferReports),
		wake:         make(chan struct{}, 1),
		descSent:     prometheus.NewDesc("weir_usage_reports_sent_total", "Usage report messages published.", nil, nil),
		descDropped:  prometheus.NewDesc("weir_usage_reports_dropped_total", "Usage report messages dropped: buffer full (Kafka unreachable or slow), unmarshalable, or left unsent at shutdown.", nil, nil),
		descBuffered: prometheus.NewDesc("weir_usage_reports_buffered", "Usage report messages waiting to be published.", nil, nil),
		descErrors:   prometheus.NewDesc("weir_usage_publish_errors_total", "Failed attempts to publish usage reports.", nil, nil),
	}, nil
}

// Instance returns the instance name the reports carry.
func (r *Reporter) Instance() string { return r.cfg.Instance }

// Run reports every interval until ctx is done, then flushes the Source
// once more (the interval in progress), tries for at most ShutdownTimeout
// to publish what is buffered, stops its sender goroutine and returns nil.
// Messages still unsent then are counted as dropped. Run may be called
// once; a second call returns ErrStarted.
func (r *Reporter) Run(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return ErrStarted
	}
	sendCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	finish, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		r.send(sendCtx, finish)
	}()

	iv := r.cfg.Interval.Milliseconds()
	between := 0
	if r.cfg.Meter != nil {
		between = r.cfg.ReadsBetween
	}
	// sleep waits until Unix ms at, and reports false if ctx ended first.
	sleep := func(at int64) bool {
		d := at - r.clock.Now().UnixMilli()
		if d <= 0 {
			return ctx.Err() == nil
		}
		select {
		case <-ctx.Done():
			return false
		case <-r.clock.After(time.Duration(d) * time.Millisecond):
			return true
		}
	}
	for {
		now := r.clock.Now().UnixMilli()
		next := floorDiv(now, iv)*iv + iv
		stopped := false
		for k := range int64(between) {
			at := next - iv + (k+1)*iv/int64(between+1)
			if r.clock.Now().UnixMilli() >= at {
				continue // started late, or the last reads ran long
			}
			if stopped = !sleep(at); stopped {
				break
			}
			if r.clock.Now().UnixMilli() >= next {
				break // late: the interval report comes first
			}
			r.between(ctx, iv/int64(between+1))
		}
		if stopped || !sleep(next) {
			break
		}
		// Label the report with the interval that just ended, whatever
		// the timer's lateness; its counts are all those since the last.
		r.report(ctx, floorDiv(r.clock.Now().UnixMilli(), iv)*iv-iv, true)
	}
	// The interval in progress: its readings would be labelled with a time
	// still to come, so it goes without.
	r.report(ctx, floorDiv(r.clock.Now().UnixMilli(), iv)*iv, false)
	close(finish)
	select {
	case <-done:
	case <-r.clock.After(r.cfg.ShutdownTimeout):
		stop()
		<-done
	}
	if lost := r.discard(); lost > 0 {
		r.log.Warn("usage reports left unpublished at shutdown", "messages", lost)
	}
	return nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// report flushes the Source into messages for the interval starting at
// startMs and queues them, with the Meter's readings if readings is set.
func (r *Reporter) report(ctx context.Context, startMs int64, readings bool) {
	rules := r.cfg.Source.Flush()
	head := r.header(startMs, r.cfg.Interval.Milliseconds())
	if readings && r.cfg.Meter != nil {
		rules = r.read(ctx, rules)
	}
	r.queue(head, rules)
}

// between reads, between two interval reports, the entries the DC holds
// quota of while quiet, and queues their readings alone
// (UsageReport.readings_only; holding.between), if it has any: the quota
// they free as their admissions age reaches the DCs that want it sooner
// (docs/architecture.md, "Long windows"). At most MaxReadings, for at
// most half of spanMs, the time to the next reads.
func (r *Reporter) between(ctx context.Context, spanMs int64) {
	at := r.clock.Now().UnixMilli()
	iv := r.cfg.Interval.Milliseconds()
	// Labelled with the interval it falls in, read at: the reads start
	// then. At an interval's start, that is the end of the one before.
	start := floorDiv(at-1, iv) * iv
	// The revision first, then the readings: they are taken after it.
	head := r.header(start, at-start)
	head.ReadingsOnly = true
	ctx, cancel := context.WithTimeout(ctx, time.Duration(spanMs)*time.Millisecond/2)
	defer cancel()
	rules := r.held.between(r.getter(ctx))
	if len(rules) > 0 {
		r.queue(head, rules)
	}
}

// header returns a report's header for the interval starting at startMs,
// of ms: the instance, and the revision it has applied.
func (r *Reporter) header(startMs, ms int64) *weirv1.UsageReport {
	head := &weirv1.UsageReport{
		Dc:              r.cfg.DC,
		Instance:        r.cfg.Instance,
		IntervalStartMs: startMs,
		IntervalMs:      ms,
		DroppedReports:  r.Dropped(),
	}
	if r.cfg.Progress != nil {
		head.Epoch, head.AppliedRevision = r.cfg.Progress.Applied()
	}
	return head
}

// queue splits rules over copies of head, numbers them and queues them.
func (r *Reporter) queue(head *weirv1.UsageReport, rules []*weirv1.RuleUsage) {
	reports := split(head, rules, r.cfg.MaxMessageBytes)
	msgs := make([]Message, 0, len(reports))
	for _, rep := range reports {
		r.seq++
		rep.Sequence = r.seq
		b, err := proto.Marshal(rep)
		if err != nil {
			r.log.Error("marshal usage report; dropped", "sequence", rep.Sequence, "err", err)
			r.mu.Lock()
			r.dropped++
			r.mu.Unlock()
			continue
		}
		msgs = append(msgs, Message{Key: r.key, Value: b})
	}
	r.lastSeq.Store(r.seq)
	r.enqueue(msgs)
}

// read sets the readings of rules and their keys, and returns rules with
// the entries read as holding quota before and quiet since (holding.go)
// added: at most MaxReadings readings, for at most half the interval.
func (r *Reporter) read(ctx context.Context, rules []*weirv1.RuleUsage) []*weirv1.RuleUsage {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Interval/2)
	defer cancel()
	get := r.getter(ctx)
	for _, ru := range rules {
		if len(ru.GetKeys()) == 0 {
			var read bool
			ru.Consumed, read = get(ru.GetDomain(), ru.GetRuleId(), "")
			r.held.note(heldRef{ru.GetDomain(), ru.GetRuleId(), ""}, ru.Consumed, read, false)
		}
		for _, k := range ru.GetKeys() {
			var read bool
			k.Consumed, read = get(ru.GetDomain(), ru.GetRuleId(), k.GetKey())
			r.held.note(heldRef{ru.GetDomain(), ru.GetRuleId(), k.GetKey()}, k.Consumed, read, false)
		}
	}
	if r.cfg.Changed != nil {
		r.cfg.Changed.TakeChanged(r.held.room(), func(domain, ruleID, key string) {
			r.held.change(heldRef{domain, ruleID, key}, r.owed)
		})
	}
	return append(rules, r.held.quiet(rules, get)...)
}

// getter returns a reader of the Meter's readings for one report: at
// most MaxReadings of them, none once ctx is done. read is false for an
// entry past that budget; v is nil when the store did not answer.
func (r *Reporter) getter(ctx context.Context) func(domain, ruleID, key string) (v *int64, read bool) {
	left := r.cfg.MaxReadings
	return func(domain, ruleID, key string) (*int64, bool) {
		if left <= 0 || ctx.Err() != nil {
			return nil, false
		}
		left--
		if c, ok := r.cfg.Meter.Consumed(ctx, domain, ruleID, key); ok {
			return &c, true
		}
		return nil, true
	}
}

// seqSlack is the room a sequence number takes in a report: a tag and a
// varint of up to 10 bytes.
const seqSlack = 11

// split spreads rules over copies of head of at most limit bytes each
// (limit must leave room for head and one key of algorithm.MaxKeyLen bytes).
// It returns at least one report, even for no rules.
func split(head *weirv1.UsageReport, rules []*weirv1.RuleUsage, limit int) []*weirv1.UsageReport {
	base := proto.Size(head) + seqSlack
	var out []*weirv1.UsageReport
	cur, size := proto.CloneOf(head), base
	add := func(ru *weirv1.RuleUsage, sz int) {
		if size+sz > limit && len(cur.Rules) > 0 {
			out = append(out, cur)
			cur, size = proto.CloneOf(head), base
		}
		cur.Rules = append(cur.Rules, ru)
		size += sz
	}
	for _, ru := range rules {
		if sz := fieldSize(proto.Size(ru)); base+sz <= limit {
			add(ru, sz)
			continue
		}
		for _, p := range splitRule(ru, limit-base) {
			add(p, fieldSize(proto.Size(p)))
		}
	}
	return append(out, cur)
}

// splitRule spreads a rule's keys over RuleUsage entries of at most room
// bytes as fields: the first with the rule's counts, the others with zero
// counts, each with at least one key.
func splitRule(ru *weirv1.RuleUsage, room int) []*weirv1.RuleUsage {
	first := &weirv1.RuleUsage{
		Domain: ru.Domain, RuleId: ru.RuleId, Share: ru.Share,
		Offered: ru.Offered, Admitted: ru.Admitted, Rejected: ru.Rejected, KeysDropped: ru.KeysDropped, Consumed: ru.Consumed,
	}
	out := []*weirv1.RuleUsage{first}
	cur, size := first, proto.Size(first)
	for _, k := range ru.Keys {
		ks := fieldSize(proto.Size(k))
		if fieldSize(size+ks) > room && len(cur.Keys) > 0 {
			cur = &weirv1.RuleUsage{Domain: ru.Domain, RuleId: ru.RuleId, Share: ru.Share}
			out = append(out, cur)
			size = proto.Size(cur)
		}
		cur.Keys = append(cur.Keys, k)
		size += ks
	}
	return out
}

// fieldSize is the size of an embedded message of n bytes as a field
// (tag below 16).
func fieldSize(n int) int {
	s := 1 + 1
	for v := uint64(n); v >= 0x80; v >>= 7 {
		s++
	}
	return s + n
}

// enqueue appends msgs to the buffer, dropping the oldest when it is full.
func (r *Reporter) enqueue(msgs []Message) {
	if len(msgs) == 0 {
		return
	}
	r.mu.Lock()
	for _, m := range msgs {
		if r.n == len(r.ring) {
			r.ring[r.head] = Message{}
			r.head = (r.head + 1) % len(r.ring)
			r.n--
			r.dropped++
		}
		r.ring[(r.head+r.n)%len(r.ring)] = m
		r.n++
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// take removes and returns up to limit messages from the front of the
// buffer.
func (r *Reporter) take(limit int) []Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := min(limit, r.n)
	if n == 0 {
		return nil
	}
	out := make([]Message, n)
	for i := range out {
		out[i] = r.ring[r.head]
		r.ring[r.head] = Message{}
		r.head = (r.head + 1) % len(r.ring)
	}
	r.n -= n
	return out
}

// requeue puts msgs, taken by take, back at the front of the buffer; those
// that no longer fit, being the oldest, are dropped.
func (r *Reporter) requeue(msgs []Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(msgs) - 1; i >= 0; i-- {
		if r.n == len(r.ring) {
			r.dropped += uint64(i + 1)
			return
		}
		r.head = (r.head - 1 + len(r.ring)) % len(r.ring)
		r.ring[r.head] = msgs[i]
		r.n++
	}
}

// discard empties the buffer, counting its messages as dropped.
func (r *Reporter) discard() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.n
	clear(r.ring)
	r.head, r.n = 0, 0
	r.dropped += uint64(n)
	return n
}

// send publishes the buffer's messages in order until ctx is done, or
// until finish is closed and the buffer is empty.
func (r *Reporter) send(ctx context.Context, finish <-chan struct{}) {
	var backoff time.Duration
	for {
		batch := r.take(maxBatch)
		if len(batch) == 0 {
			select {
			case <-r.wake:
				continue
			case <-finish:
				if r.Stats().Buffered == 0 {
					return
				}
				continue
			case <-ctx.Done():
				return
			}
		}
		pctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
		err := r.cfg.Publisher.Publish(pctx, batch)
		cancel()
		if err == nil {
			r.sent.Add(uint64(len(batch)))
			backoff = 0
			continue
		}
		r.requeue(batch)
		if ctx.Err() != nil {
			return
		}
		r.publishErrors.Add(1)
		backoff = min(max(2*backoff, r.cfg.MinBackoff), r.cfg.MaxBackoff)
		wait := backoff/2 + rand.N(backoff/2+1)
		r.log.Warn("publish usage reports; will retry", "err", err, "messages", len(batch), "retry_in", wait)
		select {
		case <-r.clock.After(wait):
		case <-ctx.Done():
			return
		}
	}
}

// ReporterStats is a snapshot of a Reporter's counters.
type ReporterStats struct {
	// Sequence is the last sequence number assigned (0: none yet).
	Sequence uint64
	// Sent counts the messages published.
	Sent uint64
	// Dropped counts the messages dropped: the oldest when the buffer was
	// full, those that could not be marshalled, and those left unsent at
	// shutdown.
	Dropped uint64
	// Buffered is the number of messages waiting, not counting those being
	// published.
	Buffered int
	// PublishErrors counts failed Publish calls.
	PublishErrors uint64
}

// Stats returns the Reporter's counters.
func (r *Reporter) Stats() ReporterStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ReporterStats{
		Sequence:      r.lastSeq.Load(),
		Sent:          r.sent.Load(),
		Dropped:       r.dropped,
		Buffered:      r.n,
		PublishErrors: r.publishErrors.Load(),
	}
}

// Dropped returns the number of messages dropped so far (see
// ReporterStats.Dropped); a prometheus.CounterFunc can read it.
func (r *Reporter) Dropped() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

// Describe implements prometheus.Collector.
func (r *Reporter) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.descSent
	ch <- r.descDropped
	ch <- r.descBuffered
	ch <- r.descErrors
}

// Collect implements prometheus.Collector: weir_usage_reports_sent_total,
// weir_usage_reports_dropped_total, weir_usage_reports_buffered and
// weir_usage_publish_errors_total.
func (r *Reporter) Collect(ch chan<- prometheus.Metric) {
	s := r.Stats()
	ch <- prometheus.MustNewConstMetric(r.descSent, prometheus.CounterValue, float64(s.Sent))
	ch <- prometheus.MustNewConstMetric(r.descDropped, prometheus.CounterValue, float64(s.Dropped))
	ch <- prometheus.MustNewConstMetric(r.descBuffered, prometheus.GaugeValue, float64(s.Buffered))
	ch <- prometheus.MustNewConstMetric(r.descErrors, prometheus.CounterValue, float64(s.PublishErrors))
}
