package adminapi

import "time"

// Series is the body of GET /rate-limits/{rule_id}/series: a global rule's
// recent history, one point per planning interval per DC, oldest first,
// over the coordinator's span (15 minutes by default). The leader keeps it
// in memory: a new leader starts with none.
type Series struct {
	Domain        string `json:"domain"`
	RuleID        string `json:"rule_id"`
	Limit         int64  `json:"limit"`
	WindowSeconds int64  `json:"window_seconds"`
	// IntervalSeconds is the time between two points.
	IntervalSeconds float64    `json:"interval_seconds"`
	DCs             []DCSeries `json:"dcs"`
}

// DCSeries is one DC's points in a Series; the server writes none as [].
type DCSeries struct {
	DC     string        `json:"dc"`
	Points []SeriesPoint `json:"points"`
}

// SeriesPoint is a DC's state of a rule at the end of one planning
// interval. Demand, Target and Share are fractions of the rule's limit (as
// in DCShare); Offered, Admitted and Rejected count the requests the DC
// reported during the interval.
type SeriesPoint struct {
	At       time.Time `json:"at"`
	Demand   float64   `json:"demand"`
	Target   float64   `json:"target"`
	Share    float64   `json:"share"`
	Offered  int64     `json:"offered"`
	Admitted int64     `json:"admitted"`
	Rejected int64     `json:"rejected"`
}

// Overview is the body of GET /overview: every global rule the leader
// plans, with each DC's latest point and its counts of the last interval
// and of the last five minutes.
type Overview struct {
	IntervalSeconds float64        `json:"interval_seconds"`
	Rules           []RuleOverview `json:"rules"`
}

// RuleOverview is one rule's line of an Overview.
type RuleOverview struct {
	Domain        string       `json:"domain"`
	RuleID        string       `json:"rule_id"`
	Limit         int64        `json:"limit"`
	WindowSeconds int64        `json:"window_seconds"`
	DCs           []DCOverview `json:"dcs"`
}

// DCOverview is one DC's part of a RuleOverview: the latest point's
// fractions, and request counts over the last interval (Last) and the last
// five minutes (Recent).
type DCOverview struct {
	DC     string  `json:"dc"`
	Demand float64 `json:"demand"`
	Target float64 `json:"target"`
	Share  float64 `json:"share"`
	Last   Counts  `json:"last"`
	Recent Counts  `json:"recent"`
}

// Counts counts requests.
type Counts struct {
	Offered  int64 `json:"offered"`
	Admitted int64 `json:"admitted"`
	Rejected int64 `json:"rejected"`
}

// Add returns the sum of c and d.
func (c Counts) Add(d Counts) Counts {
	return Counts{Offered: c.Offered + d.Offered, Admitted: c.Admitted + d.Admitted, Rejected: c.Rejected + d.Rejected}
}

// Cluster is the body of GET /cluster: the coordinators taking part in the
// election and, from the leader, each DC's limiter instances.
type Cluster struct {
	// Coordinators are the candidates, the leader first.
	Coordinators []Coordinator `json:"coordinators"`
	// Epoch is the leader's planning epoch.
	Epoch           uint64        `json:"epoch"`
	IntervalSeconds float64       `json:"interval_seconds"`
	DCs             []DCInstances `json:"dcs"`
}

// Coordinator is one coordinator in Cluster.
type Coordinator struct {
	Name     string `json:"name"`
	AdminURL string `json:"admin_url,omitempty"`
	Leader   bool   `json:"leader"`
}

// DCInstances is one DC's limiters in Cluster.
type DCInstances struct {
	DC string `json:"dc"`
	// WrittenRevision is the etcd revision of the leader's last write of
	// the DC's assignments in this term, at WrittenAt; 0 if none.
	WrittenRevision int64     `json:"written_revision"`
	WrittenAt       time.Time `json:"written_at,omitzero"`
	// Lagging is true when an instance lags; Silent when none has
	// reported lately (or there is none).
	Lagging   bool       `json:"lagging"`
	Silent    bool       `json:"silent"`
	Instances []Instance `json:"instances"`
}

// Instance is one limiter instance in Cluster.
type Instance struct {
	Instance        string `json:"instance"`
	AppliedRevision int64  `json:"applied_revision"`
	HTTPURL         string `json:"http_url,omitempty"`
	// LastReport is when the leader last received its usage report;
	// omitted if it has not in this term.
	LastReport time.Time `json:"last_report,omitzero"`
	// Lagging: it has not applied the DC's last write, made more than two
	// intervals ago. Silent: no report for three intervals.
	Lagging bool `json:"lagging"`
	Silent  bool `json:"silent"`
}
