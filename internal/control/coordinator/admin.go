package coordinator

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/internal/control/planner"
)

// Status describes the coordinator, for /v1/status.
type Status struct {
	Name      string         `json:"name"`
	Leader    bool           `json:"leader"`
	Epoch     uint64         `json:"epoch,omitempty"`
	DCs       []string       `json:"dcs"`
	Planner   planner.Stats  `json:"planner"`
	Instances map[string]int `json:"instances,omitempty"`
}

// Status returns the coordinator's status.
func (c *Coordinator) Status() Status {
	st := Status{Name: c.cfg.Name, Leader: c.Leader(), DCs: c.cfg.Planner.DCs}
	_ = c.view(func(p *planner.Planner) {
		// f runs in the loop of the term that owns p, so c.acks is that
		// term's tracker.
		c.mu.Lock()
		acks := c.acks
		c.mu.Unlock()
		st.Epoch, st.Planner, st.Instances = p.Epoch(), p.Stats(), acks.counts()
	})
	return st
}

// Shares returns the leader's view of every global rule, and false when
// this coordinator does not lead.
func (c *Coordinator) Shares() ([]planner.RuleView, bool) {
	var views []planner.RuleView
	err := c.view(func(p *planner.Planner) { views = p.Snapshot() })
	return views, err == nil
}

// KeyShares returns the leader's view of a rule's keys with shares of their
// own.
func (c *Coordinator) KeyShares(domain, ruleID string) ([]planner.KeyView, bool) {
	var keys []planner.KeyView
	err := c.view(func(p *planner.Planner) { keys = p.Keys(domain, ruleID) })
	return keys, err == nil
}

// Handler serves the coordinator's read-only admin endpoints, described by
// docs/openapi/coordinator.yaml:
//
//	GET /healthz                     200 while the process runs
//	GET /v1/status                   Status as JSON
//	GET /v1/shares                   every global rule's per-DC demand and shares (leader only; 503 elsewhere)
//	GET /v1/shares/{domain}/{rule}   the rule's keys with shares of their own (leader only)
func (c *Coordinator) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, r := range c.routes() {
		mux.HandleFunc(r.pattern, r.serve)
	}
	return mux
}

// Routes returns the patterns Handler serves, as http.ServeMux reads them
// ("GET /v1/shares/{domain}/{rule}"); docs/openapi/coordinator.yaml must
// document each.
func (c *Coordinator) Routes() []string {
	var out []string
	for _, r := range c.routes() {
		out = append(out, r.pattern)
	}
	return out
}

// route is one endpoint of Handler.
type route struct {
	pattern string
	serve   http.HandlerFunc
}

// routes returns Handler's endpoints, the one list both Handler and Routes
// read.
func (c *Coordinator) routes() []route {
	return []route{
		{"GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte("ok\n"))
		}},
		{"GET /v1/status", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, c.Status())
		}},
		{"GET /v1/shares", func(w http.ResponseWriter, _ *http.Request) {
			v, ok := c.Shares()
			if !ok {
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "not the leader"})
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"rules": v})
		}},
		{"GET /v1/shares/{domain}/{rule}", func(w http.ResponseWriter, r *http.Request) {
			v, ok := c.KeyShares(r.PathValue("domain"), r.PathValue("rule"))
			switch {
			case !ok:
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "not the leader"})
			case v == nil:
				writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such global rule"})
			default:
				writeJSON(w, http.StatusOK, map[string]any{"keys": v})
			}
		}},
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// Collector exports the coordinator's state to Prometheus.
func (c *Coordinator) Collector() prometheus.Collector { return collector{c} }

type collector struct{ c *Coordinator }

var (
	descLeader   = prometheus.NewDesc("weir_coordinator_leader", "1 while this coordinator leads.", nil, nil)
	descEpoch    = prometheus.NewDesc("weir_coordinator_epoch", "Epoch of the last planning round.", nil, nil)
	descReports  = prometheus.NewDesc("weir_coordinator_reports_total", "Usage reports, by outcome, in this leadership term.", []string{"outcome"}, nil)
	descWrites   = prometheus.NewDesc("weir_coordinator_assignment_writes_total", "Assignment documents written, by outcome, in this leadership term.", []string{"outcome"}, nil)
	descSkipped  = prometheus.NewDesc("weir_coordinator_skipped_total", "Malformed inputs skipped, by kind (see the log for what they were; skipped messages are logged at most one line per 10 s).", []string{"kind"}, nil)
	descTerms    = prometheus.NewDesc("weir_coordinator_elections_won_total", "Elections won.", nil, nil)
	descDeposed  = prometheus.NewDesc("weir_coordinator_deposed_total", "Terms ended by a refused fenced write.", nil, nil)
	descLost     = prometheus.NewDesc("weir_coordinator_sessions_lost_total", "Election sessions that ended under the coordinator (lease expired or revoked, keepalives failed), leading or standing by; each is followed by a new session and campaign.", nil, nil)
	descShare    = prometheus.NewDesc("weir_coordinator_share", "Share written per global rule and DC.", []string{"domain", "rule", "dc"}, nil)
	descDemand   = prometheus.NewDesc("weir_coordinator_demand", "Estimated demand per global rule and DC, a fraction of the limit.", []string{"domain", "rule", "dc"}, nil)
	descKeyCount = prometheus.NewDesc("weir_coordinator_keys_with_shares", "Keys with shares of their own, per rule.", []string{"domain", "rule"}, nil)
	descRepairs  = prometheus.NewDesc("weir_coordinator_repairs_total", "Documents under the quotas prefix the leader found were not its own (corrupt, deleted, or written by another) and rewrote.", nil, nil)
	descShadows  = prometheus.NewDesc("weir_coordinator_shadow_repairs_total", "Rule shadows (rules-valid/) the leader wrote or deleted: valid documents copied, last valid versions held in memory put back over invalid or missing shadows, shadows of deleted rules deleted.", nil, nil)
	descBlind    = prometheus.NewDesc("weir_coordinator_blind_intervals_total", "Intervals closed without a report from any DC (the usage pipeline was down; estimates held), in this leadership term.", nil, nil)
)

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descEpoch, descReports, descWrites, descSkipped, descTerms, descDeposed, descLost, descShare, descDemand, descKeyCount, descBlind, descRepairs, descShadows} {
		ch <- d
	}
}

func (x collector) Collect(ch chan<- prometheus.Metric) {
	c := x.c
	st := c.Status()
	leader := 0.0
	if st.Leader {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, leader)
	ch <- prometheus.MustNewConstMetric(descEpoch, prometheus.GaugeValue, float64(st.Epoch))
	for outcome, n := range map[string]uint64{"accepted": st.Planner.Reports, "duplicate": st.Planner.Duplicates, "refused": st.Planner.Refused, "late": st.Planner.LateReports, "readings": st.Planner.Readings} {
		ch <- prometheus.MustNewConstMetric(descReports, prometheus.CounterValue, float64(n), outcome)
	}
	ch <- prometheus.MustNewConstMetric(descBlind, prometheus.CounterValue, float64(st.Planner.BlindIntervals))
	ch <- prometheus.MustNewConstMetric(descWrites, prometheus.CounterValue, float64(st.Planner.Writes), "ok")
	ch <- prometheus.MustNewConstMetric(descWrites, prometheus.CounterValue, float64(st.Planner.WriteFailures), "failed")
	for kind, n := range map[string]uint64{"message": c.stats.badMessages.Load(), "document": c.stats.badDocs.Load(), "policy": c.stats.badPolicies.Load(),
		"instance": c.stats.badInstances.Load(), "unknown_rule": st.Planner.UnknownRules, "untracked_key": st.Planner.KeysUntracked} {
		ch <- prometheus.MustNewConstMetric(descSkipped, prometheus.CounterValue, float64(n), kind)
	}
	ch <- prometheus.MustNewConstMetric(descTerms, prometheus.CounterValue, float64(c.stats.elections.Load()))
	ch <- prometheus.MustNewConstMetric(descDeposed, prometheus.CounterValue, float64(c.stats.deposed.Load()))
	ch <- prometheus.MustNewConstMetric(descLost, prometheus.CounterValue, float64(c.stats.sessionsLost.Load()))
	ch <- prometheus.MustNewConstMetric(descRepairs, prometheus.CounterValue, float64(c.stats.repairs.Load()))
	ch <- prometheus.MustNewConstMetric(descShadows, prometheus.CounterValue, float64(c.stats.shadowRepairs.Load()))
	views, ok := c.Shares()
	if !ok {
		return
	}
	for _, v := range views {
		ch <- prometheus.MustNewConstMetric(descKeyCount, prometheus.GaugeValue, float64(v.Keys), v.Domain, v.RuleID)
		for _, d := range v.DCs {
			ch <- prometheus.MustNewConstMetric(descShare, prometheus.GaugeValue, d.Share, v.Domain, v.RuleID, d.DC)
			ch <- prometheus.MustNewConstMetric(descDemand, prometheus.GaugeValue, d.Demand, v.Domain, v.RuleID, d.DC)
		}
	}
}
