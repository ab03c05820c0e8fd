package coordinatord

import (
	"context"
	"fmt"
	"time"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/internal/control/coordinator"
	"github.com/weirhq/weir/internal/control/series"
	"github.com/weirhq/weir/pkg/adminapi"
)

// Live returns the admin API's live views of co (adminserver.Live, and
// adminserver.SeriesLive for the console's endpoints): answered from its
// planner and history when it leads, else by naming the leader. For
// programs that serve an admin API of their own around a coordinator (the
// simulator).
func Live(co *coordinator.Coordinator) adminserver.Live { return live{co} }

var _ adminserver.SeriesLive = live{}

// recentSpan is the period of an overview's Recent counts.
const recentSpan = 5 * time.Minute

func (l live) Series(ctx context.Context, domain, ruleID string) (adminapi.Series, error) {
	r, ok, err := l.co.Series(domain, ruleID)
	if err != nil {
		return adminapi.Series{}, l.notLeader(ctx, err)
	}
	if !ok {
		return adminapi.Series{}, fmt.Errorf("%w: no series of %s/%s (not a global rule, or not planned yet)", adminserver.ErrUnknown, domain, ruleID)
	}
	out := adminapi.Series{Domain: domain, RuleID: ruleID, Limit: r.Limit, WindowSeconds: r.WindowSeconds,
		IntervalSeconds: l.co.SeriesInterval().Seconds(), DCs: make([]adminapi.DCSeries, len(r.DCs))}
	for i, d := range r.DCs {
		pts := make([]adminapi.SeriesPoint, len(d.Points))
		for j, p := range d.Points {
			pts[j] = adminapi.SeriesPoint{At: p.At, Demand: p.Demand, Target: p.Target, Share: p.Share,
				Offered: int64(p.Offered), Admitted: int64(p.Admitted), Rejected: int64(p.Rejected)}
		}
		out.DCs[i] = adminapi.DCSeries{DC: d.DC, Points: pts}
	}
	return out, nil
}

func (l live) Overview(ctx context.Context) (adminapi.Overview, error) {
	all, err := l.co.AllSeries()
	if err != nil {
		return adminapi.Overview{}, l.notLeader(ctx, err)
	}
	out := adminapi.Overview{IntervalSeconds: l.co.SeriesInterval().Seconds(), Rules: make([]adminapi.RuleOverview, len(all))}
	for i, r := range all {
		ro := adminapi.RuleOverview{Domain: r.Domain, RuleID: r.RuleID, Limit: r.Limit, WindowSeconds: r.WindowSeconds, DCs: make([]adminapi.DCOverview, len(r.DCs))}
		for j, d := range r.DCs {
			ro.DCs[j] = overviewOf(d)
		}
		out.Rules[i] = ro
	}
	return out, nil
}

// overviewOf sums a DC's series into its overview line.
func overviewOf(d series.DC) adminapi.DCOverview {
	o := adminapi.DCOverview{DC: d.DC}
	if len(d.Points) == 0 {
		return o
	}
	last := d.Points[len(d.Points)-1]
	counts := func(p series.Point) adminapi.Counts {
		return adminapi.Counts{Offered: int64(p.Offered), Admitted: int64(p.Admitted), Rejected: int64(p.Rejected)}
	}
	o.Demand, o.Target, o.Share, o.Last = last.Demand, last.Target, last.Share, counts(last)
	for _, p := range d.Points {
		if last.At.Sub(p.At) < recentSpan {
			o.Recent = o.Recent.Add(counts(p))
		}
	}
	return o
}

func (l live) Cluster(ctx context.Context) (adminapi.Cluster, error) {
	epoch, dcs, err := l.co.Instances()
	if err != nil {
		return adminapi.Cluster{}, l.notLeader(ctx, err)
	}
	cands, err := l.co.Candidates(ctx)
	if err != nil {
		return adminapi.Cluster{}, err
	}
	iv := l.co.SeriesInterval()
	out := adminapi.Cluster{Epoch: epoch, IntervalSeconds: iv.Seconds()}
	for _, c := range cands {
		out.Coordinators = append(out.Coordinators, adminapi.Coordinator{Name: c.Name, AdminURL: c.AdminURL, Leader: c.Leader})
	}
	now := time.Now()
	for _, d := range dcs {
		di := adminapi.DCInstances{DC: d.DC, WrittenRevision: d.Written, WrittenAt: d.WrittenAt, Silent: true}
		for _, in := range d.Instances {
			inst := adminapi.Instance{Instance: in.Instance, AppliedRevision: in.Applied, HTTPURL: in.HTTPURL, LastReport: in.LastReport}
			inst.Silent = in.LastReport.IsZero() || now.Sub(in.LastReport) > 3*iv
			inst.Lagging = in.Applied < d.Written && now.Sub(d.WrittenAt) > 2*iv
			di.Silent = di.Silent && inst.Silent
			di.Lagging = di.Lagging || inst.Lagging
			di.Instances = append(di.Instances, inst)
		}
		out.DCs = append(out.DCs, di)
	}
	return out, nil
}
