package adminserver

import (
	"context"
	"net/http"

	"github.com/weirhq/weir/pkg/adminapi"
)

// SeriesLive is what a Live also implements to answer the endpoints of
// the operators' console: GET /rate-limits/{rule_id}/series, GET /overview
// and GET /cluster. Without it they answer 503. Errors as for Live.Stats.
type SeriesLive interface {
	// Series returns a global rule's recent history; ErrUnknown when the
	// leader has none.
	Series(ctx context.Context, domain, ruleID string) (adminapi.Series, error)
	// Overview returns every planned global rule's latest state.
	Overview(ctx context.Context) (adminapi.Overview, error)
	// Cluster returns the coordinators and each DC's limiters.
	Cluster(ctx context.Context) (adminapi.Cluster, error)
}

// routeSeries adds the console's endpoints.
func (s *Server) routeSeries() {
	s.handle("GET /rate-limits/{rule_id}/series", s.getSeries)
	s.handle("GET /overview", s.getOverview)
	s.handle("GET /cluster", s.getCluster)
}

func (s *Server) seriesLive() (SeriesLive, error) {
	sl, ok := s.cfg.Live.(SeriesLive)
	if !ok {
		return nil, noLive()
	}
	return sl, nil
}

// getSeries serves GET /rate-limits/{rule_id}/series.
func (s *Server) getSeries(w http.ResponseWriter, r *http.Request) error {
	domain, id, err := s.ruleRef(r)
	if err != nil {
		return err
	}
	sl, err := s.seriesLive()
	if err != nil {
		return err
	}
	ctx, cancel := s.readCtx(r)
	defer cancel()
	if _, err := s.mustReadRule(ctx, domain, id); err != nil {
		return err
	}
	ser, err := sl.Series(ctx, domain, id)
	if err != nil {
		return liveError(err, "the series of rule '"+id+"' in domain '"+domain+"'")
	}
	ser.Domain, ser.RuleID = domain, id
	if ser.DCs == nil {
		ser.DCs = []adminapi.DCSeries{}
	}
	for i := range ser.DCs {
		if ser.DCs[i].Points == nil {
			ser.DCs[i].Points = []adminapi.SeriesPoint{}
		}
	}
	writeJSON(w, http.StatusOK, ser)
	return nil
}

// getOverview serves GET /overview; ?domain= keeps one domain's rules.
func (s *Server) getOverview(w http.ResponseWriter, r *http.Request) error {
	sl, err := s.seriesLive()
	if err != nil {
		return err
	}
	only := r.URL.Query().Get("domain")
	if only != "" && !validName(only) {
		return errorf(http.StatusBadRequest, "invalid domain %q", only)
	}
	ctx, cancel := s.readCtx(r)
	defer cancel()
	ov, err := sl.Overview(ctx)
	if err != nil {
		return liveError(err, "the overview")
	}
	rules := make([]adminapi.RuleOverview, 0, len(ov.Rules))
	for _, ro := range ov.Rules {
		if only == "" || ro.Domain == only {
			if ro.DCs == nil {
				ro.DCs = []adminapi.DCOverview{}
			}
			rules = append(rules, ro)
		}
	}
	ov.Rules = rules
	writeJSON(w, http.StatusOK, ov)
	return nil
}

// getCluster serves GET /cluster.
func (s *Server) getCluster(w http.ResponseWriter, r *http.Request) error {
	sl, err := s.seriesLive()
	if err != nil {
		return err
	}
	ctx, cancel := s.readCtx(r)
	defer cancel()
	cl, err := sl.Cluster(ctx)
	if err != nil {
		return liveError(err, "the cluster")
	}
	if cl.Coordinators == nil {
		cl.Coordinators = []adminapi.Coordinator{}
	}
	if cl.DCs == nil {
		cl.DCs = []adminapi.DCInstances{}
	}
	for i := range cl.DCs {
		if cl.DCs[i].Instances == nil {
			cl.DCs[i].Instances = []adminapi.Instance{}
		}
	}
	writeJSON(w, http.StatusOK, cl)
	return nil
}
