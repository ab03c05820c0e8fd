package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/control/planner"
	"github.com/weirhq/weir/internal/control/series"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// history is what the coordinator remembers for operators beside the
// planner: each global rule's recent series (package series), the time of
// each limiter instance's last report, and each DC's last assignment
// write.
type history struct {
	series *series.Store

	// tally counts the requests reported per rule and DC since the last
	// round; only the leader's loop touches it.
	tally map[tallyKey]*[3]uint64

	mu       sync.Mutex
	reported map[string]time.Time // by DC "/" instance
	written  map[string]writeMark // by DC
}

type tallyKey struct{ domain, rule, dc string }

type writeMark struct {
	rev int64
	at  time.Time
}

func newHistory(interval time.Duration) *history {
	s, err := series.New(series.Config{Interval: interval})
	if err != nil {
		// The planner's config, validated in New, has a positive interval.
		panic(fmt.Sprintf("coordinator: series: %v", err))
	}
	return &history{series: s, tally: map[tallyKey]*[3]uint64{}, reported: map[string]time.Time{}, written: map[string]writeMark{}}
}

// reset begins a term: nothing of an earlier term is shown as current.
func (h *history) reset() {
	h.series.Reset()
	clear(h.tally)
	h.mu.Lock()
	clear(h.reported)
	clear(h.written)
	h.mu.Unlock()
}

// observe notes a report received at at. Called by the leader's loop.
func (h *history) observe(r *weirv1.UsageReport, at time.Time) {
	h.seen(r, at)
	for _, ru := range r.GetRules() {
		k := tallyKey{ru.GetDomain(), ru.GetRuleId(), r.GetDc()}
		t := h.tally[k]
		if t == nil {
			t = new([3]uint64)
			h.tally[k] = t
		}
		t[0] += ru.GetOffered()
		t[1] += ru.GetAdmitted()
		t[2] += ru.GetRejected()
	}
}

// seen notes that r's instance reported at.
func (h *history) seen(r *weirv1.UsageReport, at time.Time) {
	h.mu.Lock()
	h.reported[r.GetDc()+"/"+r.GetInstance()] = at
	h.mu.Unlock()
}

// wrote notes that assignments of dc were written at revision rev.
func (h *history) wrote(dc string, rev int64, at time.Time) {
	h.mu.Lock()
	h.written[dc] = writeMark{rev, at}
	h.mu.Unlock()
}

// record adds a point per planned rule and DC, from the planner's view
// after a tick and the requests reported since the last one. Called by the
// leader's loop.
func (h *history) record(p *planner.Planner, now time.Time) {
	views := p.Snapshot()
	round := make([]series.Sample, len(views))
	for i, v := range views {
		s := series.Sample{Domain: v.Domain, RuleID: v.RuleID, Limit: v.Limit, WindowSeconds: v.WindowSeconds, DCs: make([]series.DCSample, len(v.DCs))}
		for j, d := range v.DCs {
			pt := series.Point{At: now, Demand: d.Demand, Target: d.Target, Share: d.Share}
			if t := h.tally[tallyKey{v.Domain, v.RuleID, d.DC}]; t != nil {
				pt.Offered, pt.Admitted, pt.Rejected = t[0], t[1], t[2]
			}
			s.DCs[j] = series.DCSample{DC: d.DC, Point: pt}
		}
		round[i] = s
	}
	h.series.Record(round)
	clear(h.tally)
}

// Series returns the recent history of one global rule, and false when the
// leader has none (yet); ErrNotLeader on a standby.
func (c *Coordinator) Series(domain, ruleID string) (series.Rule, bool, error) {
	if !c.Leader() {
		return series.Rule{}, false, ErrNotLeader
	}
	r, ok := c.history.series.Rule(domain, ruleID)
	return r, ok, nil
}

// AllSeries returns the recent history of every global rule the leader
// plans; ErrNotLeader on a standby.
func (c *Coordinator) AllSeries() ([]series.Rule, error) {
	if !c.Leader() {
		return nil, ErrNotLeader
	}
	return c.history.series.Rules(), nil
}

// SeriesInterval returns the time between two points of a series.
func (c *Coordinator) SeriesInterval() time.Duration { return c.history.series.Interval() }

// Candidate is a coordinator taking part in the election.
type Candidate struct {
	Name     string
	AdminURL string
	// Leader is true for the candidate that leads (the oldest).
	Leader bool
}

// Candidates returns the coordinators campaigning now, the leader first,
// read from the election in etcd; any coordinator can answer.
func (c *Coordinator) Candidates(ctx context.Context) ([]Candidate, error) {
	resp, err := c.cfg.Etcd.Get(ctx, c.cfg.Layout.Election(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(100))
	if err != nil {
		return nil, fmt.Errorf("coordinator: list candidates: %w", err)
	}
	out := make([]Candidate, 0, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		var cand candidate
		if err := json.Unmarshal(kv.Value, &cand); err != nil {
			cand.Name = string(kv.Value) // a coordinator of an older version
		}
		out = append(out, Candidate{Name: cand.Name, AdminURL: cand.AdminURL, Leader: i == 0})
	}
	return out, nil
}

// InstanceView is what the leader knows of one limiter instance.
type InstanceView struct {
	Instance string
	// Applied is the assignment revision the instance says it applied.
	Applied int64
	// HTTPURL is the base URL of its HTTP API; empty if unknown.
	HTTPURL string
	// LastReport is when its last usage report was received in this term;
	// zero if none was.
	LastReport time.Time
}

// DCView is what the leader knows of one DC's limiters.
type DCView struct {
	DC string
	// Written is the revision of the DC's last assignment write in this
	// term, at WrittenAt; zero if none.
	Written   int64
	WrittenAt time.Time
	Instances []InstanceView
}

// Instances returns each DC's live limiter instances, in DC order, each
// sorted by name; ErrNotLeader on a standby (only the leader tracks them).
func (c *Coordinator) Instances() (epoch uint64, dcs []DCView, err error) {
	err = c.view(func(p *planner.Planner) {
		epoch = p.Epoch()
		c.mu.Lock()
		acks := c.acks
		c.mu.Unlock()
		h := c.history
		h.mu.Lock()
		defer h.mu.Unlock()
		byDC := acks.instances()
		for _, dc := range c.cfg.Planner.DCs {
			v := DCView{DC: dc, Written: h.written[dc].rev, WrittenAt: h.written[dc].at}
			for _, in := range byDC[dc] {
				in.LastReport = h.reported[dc+"/"+in.Instance]
				v.Instances = append(v.Instances, in)
			}
			dcs = append(dcs, v)
		}
	})
	return epoch, dcs, err
}

// instances returns the live instances by DC, each DC's sorted by name.
func (a *ackTracker) instances() map[string][]InstanceView {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string][]InstanceView{}
	for _, in := range a.live {
		out[in.dc] = append(out[in.dc], InstanceView{Instance: in.name, Applied: in.applied, HTTPURL: in.httpURL})
	}
	for _, ins := range out {
		sort.Slice(ins, func(i, j int) bool { return ins[i].Instance < ins[j].Instance })
	}
	return out
}
