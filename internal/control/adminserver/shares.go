package adminserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/allocate"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/sharepolicy"
)

// readPolicy reads a rule's share policy: its document and mod revision,
// both zero when there is none.
func (s *Server) readPolicy(ctx context.Context, domain, id string) (sharepolicy.Policy, []byte, int64, error) {
	resp, err := s.cfg.Etcd.Get(ctx, s.cfg.Layout.Policy(domain, id))
	if err != nil {
		return sharepolicy.Policy{}, nil, 0, etcdError("read share policy", err)
	}
	if len(resp.Kvs) == 0 {
		return sharepolicy.Policy{}, nil, 0, nil
	}
	kv := resp.Kvs[0]
	p, err := sharepolicy.Decode(kv.Value)
	if err != nil {
		// Shown and replaceable: an operator can overwrite it with PUT.
		s.log.Warn("invalid share policy in etcd", "key", string(kv.Key), "err", err)
	}
	return p, kv.Value, kv.ModRevision, nil
}

// policyError turns an error of sharepolicy.Decode into an answer: 422
// listing each field's problem (a key repeated at any level, an unknown
// field, a wrong type), or 400 for a body that is not one JSON document.
func policyError(err error) error {
	if ve, ok := errors.AsType[*sharepolicy.ValidationError](err); ok {
		he := errorf(http.StatusUnprocessableEntity, "invalid share policy")
		for _, fe := range ve.Errors {
			he.body.Fields = append(he.body.Fields, adminapi.FieldError{Field: fe.Path, Reason: fe.Reason})
		}
		he.body.Omitted = ve.Omitted
		return he
	}
	return errorf(http.StatusBadRequest, "malformed JSON: %v", err)
}

// globalRule reads a rule and checks that it has shares: 404 when it does
// not exist, 422 when it is local.
func (s *Server) globalRule(ctx context.Context, domain, id string) (storedRule, error) {
	sr, err := s.mustReadRule(ctx, domain, id)
	if err == nil && sr.r.Scope != rule.ScopeGlobal {
		err = errorf(http.StatusUnprocessableEntity, "rule '%s' in domain '%s' has scope %q; only global rules have shares", id, domain, sr.r.Scope)
	}
	return sr, err
}

// getShares serves GET /rate-limits/{rule_id}/shares.
func (s *Server) getShares(w http.ResponseWriter, r *http.Request) error {
	domain, id, err := s.ruleRef(r)
	if err != nil {
		return err
	}
	if s.cfg.Live == nil {
		return noLive()
	}
	ctx, cancel := s.readCtx(r)
	defer cancel()
	if _, err := s.globalRule(ctx, domain, id); err != nil {
		return err
	}
	pol, _, rev, err := s.readPolicy(ctx, domain, id)
	if err != nil {
		return err
	}
	dcs, err := s.cfg.Live.Shares(ctx, domain, id)
	if err != nil {
		return liveError(err, "the shares of rule '"+id+"' in domain '"+domain+"'")
	}
	out := adminapi.Shares{Domain: domain, RuleID: id, DCs: make([]adminapi.DCShare, len(dcs)), ETag: etag(rev)}
	for i, d := range dcs {
		p := pol.DCs[d.DC]
		d.Pin, d.Floor, d.Ceiling, d.Drained = p.Pin, p.Floor, p.Ceiling, p.Drained
		out.DCs[i] = d
	}
	w.Header().Set("ETag", out.ETag)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// putShares serves PUT /rate-limits/{rule_id}/shares: it replaces the
// rule's share policy.
func (s *Server) putShares(w http.ResponseWriter, r *http.Request) error {
	domain, id, err := s.ruleRef(r)
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r, min(s.cfg.MaxBodyBytes, sharepolicy.MaxBytes))
	if err != nil {
		return err
	}
	pol, err := sharepolicy.Decode(body)
	if err != nil {
		return policyError(err)
	}
	settings, err := pol.Settings(s.cfg.DCs)
	if err != nil {
		return errorf(http.StatusUnprocessableEntity, "%v", err)
	}
	if err := pol.Contradictions(); err != nil {
		return policyError(err)
	}
	if pol.DCs == nil {
		pol.DCs = map[string]sharepolicy.DCPolicy{}
	}
	doc, err := json.Marshal(&pol)
	if err != nil {
		return err
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	ruleKey, key := s.cfg.Layout.Rule(domain, id), s.cfg.Layout.Policy(domain, id)
	for range maxAttempts {
		sr, err := s.globalRule(ctx, domain, id)
		if err != nil {
			return err
		}
		_, old, rev, err := s.readPolicy(ctx, domain, id)
		if err != nil {
			return err
		}
		if err := checkIfMatch(r, rev); err != nil {
			return err
		}
		rec := s.newRecord(r, s.cfg.Now().UTC(), adminapi.ActionShares, domain, id, old, doc)
		resp, err := s.commit(ctx, rec,
			[]clientv3.Cmp{
				clientv3.Compare(clientv3.ModRevision(ruleKey), "=", sr.rev),
				clientv3.Compare(clientv3.ModRevision(key), "=", rev),
			},
			clientv3.OpPut(key, string(doc)))
		if err != nil {
			return err
		}
		if resp.Succeeded {
			s.changed(ctx, rec, resp.Header.Revision)
			w.Header().Set("ETag", etag(resp.Header.Revision))
			if allZero(settings) {
				msg := fmt.Sprintf("every DC is drained or pinned at 0: rule '%s' in domain '%s' rejects every request in every DC", id, domain)
				s.log.Warn(msg, "domain", domain, "rule_id", id)
				w.Header().Add(adminapi.HeaderWarning, msg)
			}
			writeRaw(w, http.StatusOK, doc)
			return nil
		}
	}
	return errorf(http.StatusConflict, "rule '%s' in domain '%s' or its share policy kept changing; try again", id, domain)
}

// allZero reports whether settings, over every DC the server knows, leave
// each of them a share of 0 (drained, or pinned at 0), so that the rule
// rejects every request everywhere. Such a policy is accepted — it is how
// an operator stops a rule's traffic in every DC — and the answer says so.
func allZero(settings []allocate.DC) bool {
	for _, d := range settings {
		if !d.Drained && !(d.Pinned && d.Pin == 0) {
			return false
		}
	}
	return len(settings) > 0
}
