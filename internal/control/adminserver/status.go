package adminserver

import (
	"errors"
	"net/http"

	"github.com/weirhq/weir/pkg/adminapi"
)

// maxKeyLen bounds the key of a key-status request.
const maxKeyLen = 4096

// noLive answers the endpoints that need a Live when there is none.
func noLive() error {
	return errorf(http.StatusServiceUnavailable, "live data is not available from this coordinator")
}

// liveError turns an error of Live about what into an answer.
func liveError(err error, what string) error {
	var nl *NotLeaderError
	switch {
	case errors.As(err, &nl):
		he := errorf(http.StatusServiceUnavailable, "this coordinator does not lead; ask the leader for %s", what)
		he.body.Leader, he.cause = nl.Leader, err
		return he
	case errors.Is(err, ErrNotLeader):
		return errorf(http.StatusServiceUnavailable, "this coordinator does not lead; ask the leader for %s", what)
	case errors.Is(err, ErrUnknown):
		return errorf(http.StatusNotFound, "no live data for %s", what)
	}
	he := errorf(http.StatusServiceUnavailable, "live data for %s unavailable", what)
	he.cause = err
	return he
}

// getStats serves GET /rate-limits/{rule_id}/stats.
func (s *Server) getStats(w http.ResponseWriter, r *http.Request) error {
	domain, id, err := s.ruleRef(r)
	if err != nil {
		return err
	}
	if s.cfg.Live == nil {
		return noLive()
	}
	ctx, cancel := s.readCtx(r)
	defer cancel()
	if _, err := s.mustReadRule(ctx, domain, id); err != nil {
		return err
	}
	st, err := s.cfg.Live.Stats(ctx, domain, id)
	if err != nil {
		return liveError(err, "rule '"+id+"' in domain '"+domain+"'")
	}
	st.RuleID = id
	st.RejectionRate = 0
	if st.TotalRequests > 0 {
		st.RejectionRate = float64(st.RejectedRequests) / float64(st.TotalRequests)
	}
	if st.HotKeys == nil {
		st.HotKeys = []adminapi.HotKey{}
	}
	if st.DCs == nil {
		st.DCs = map[string]adminapi.DCStats{}
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// getKeyStatus serves GET /rate-limits/{rule_id}/{key...}.
func (s *Server) getKeyStatus(w http.ResponseWriter, r *http.Request) error {
	domain, id, err := s.ruleRef(r)
	if err != nil {
		return err
	}
	key := r.PathValue("key")
	switch {
	case key == "":
		return errorf(http.StatusNotFound, "no key given: GET /rate-limits/{rule_id}/{key}")
	case len(key) > maxKeyLen:
		return errorf(http.StatusBadRequest, "key longer than %d bytes", maxKeyLen)
	}
	if s.cfg.Live == nil {
		return noLive()
	}
	ctx, cancel := s.readCtx(r)
	defer cancel()
	if _, err := s.mustReadRule(ctx, domain, id); err != nil {
		return err
	}
	dcs, err := s.cfg.Live.KeyStatus(ctx, domain, id, key)
	if err != nil {
		return liveError(err, "key '"+key+"' of rule '"+id+"' in domain '"+domain+"'")
	}
	if dcs == nil {
		dcs = []adminapi.DCKeyStatus{}
	}
	writeJSON(w, http.StatusOK, adminapi.KeyStatus{Domain: domain, RuleID: id, Key: key, DCs: dcs})
	return nil
}
