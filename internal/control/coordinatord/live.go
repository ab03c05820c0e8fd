package coordinatord

import (
	"context"
	"errors"
	"fmt"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/internal/control/coordinator"
	"github.com/weirhq/weir/pkg/adminapi"
)

// live answers the admin API's live views from the coordinator: from its
// planner when it leads, else by naming the leader.
type live struct {
	co *coordinator.Coordinator
}

var _ adminserver.Live = live{}

// notLeader turns the coordinator's ErrNotLeader into the admin API's
// error naming the leader.
func (l live) notLeader(ctx context.Context, err error) error {
	if !errors.Is(err, coordinator.ErrNotLeader) {
		return err
	}
	_, url, lerr := l.co.LeaderInfo(ctx)
	if lerr != nil {
		return fmt.Errorf("%w: %v", adminserver.ErrNotLeader, lerr)
	}
	return &adminserver.NotLeaderError{Leader: url}
}

func (l live) Stats(ctx context.Context, domain, ruleID string) (adminapi.RuleStats, error) {
	st, err := l.co.Stats(domain, ruleID, 20)
	if err != nil {
		return adminapi.RuleStats{}, l.notLeader(ctx, err)
	}
	out := adminapi.RuleStats{DCs: map[string]adminapi.DCStats{}, LastUpdated: st.LastUpdated}
	for dc, s := range st.DCs {
		out.DCs[dc] = adminapi.DCStats{TotalRequests: int64(s.Offered), RejectedRequests: int64(s.Rejected)}
		out.TotalRequests += int64(s.Offered)
		out.RejectedRequests += int64(s.Rejected)
	}
	for _, k := range st.HotKeys {
		out.HotKeys = append(out.HotKeys, adminapi.HotKey{Key: k.Key, RequestCount: int64(k.Requests), RejectionCount: int64(k.Rejections)})
	}
	return out, nil
}

func (l live) Shares(ctx context.Context, domain, ruleID string) ([]adminapi.DCShare, error) {
	v, ok, err := l.co.RuleShares(domain, ruleID)
	if err != nil {
		return nil, l.notLeader(ctx, err)
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s/%s is not a global rule the coordinator plans", adminserver.ErrUnknown, domain, ruleID)
	}
	st, _ := l.co.Stats(domain, ruleID, 0)
	out := make([]adminapi.DCShare, len(v.DCs))
	for i, d := range v.DCs {
		out[i] = adminapi.DCShare{DC: d.DC, Demand: d.Demand, Share: d.Share, Target: d.Target}
		// Admitted, as a fraction of the limit per window (the month at
		// hand for calendar months, as Demand), over the statistics' period.
		if s, ok := st.DCs[d.DC]; ok && v.Limit > 0 && st.Period > 0 && v.Renewal > 0 {
			windows := float64(st.Period) / float64(v.Renewal)
			out[i].Admitted = float64(s.Admitted) / windows / float64(v.Limit)
		}
	}
	return out, nil
}

func (l live) KeyStatus(ctx context.Context, domain, ruleID, key string) ([]adminapi.DCKeyStatus, error) {
	ks, err := l.co.KeyStatus(ctx, domain, ruleID, key)
	if err != nil {
		return nil, l.notLeader(ctx, err)
	}
	return ks, nil
}
