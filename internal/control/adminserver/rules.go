package adminserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/document"
	"github.com/weirhq/weir/pkg/rule"
)

// maxAttempts bounds the read-merge-write loop of a change that meets
// concurrent changes (without If-Match); then 409.
const maxAttempts = 3

// storedRule is a rule as read from etcd.
type storedRule struct {
	r   rule.Rule
	doc []byte // as stored
	rev int64  // its mod revision
}

// readRule reads a rule; ok is false when there is none.
func (s *Server) readRule(ctx context.Context, domain, id string) (sr storedRule, ok bool, err error) {
	resp, err := s.cfg.Etcd.Get(ctx, s.cfg.Layout.Rule(domain, id))
	if err != nil {
		return storedRule{}, false, etcdError("read rule", err)
	}
	if len(resp.Kvs) == 0 {
		return storedRule{}, false, nil
	}
	kv := resp.Kvs[0]
	r, err := rule.ParseRule(kv.Value)
	if err != nil {
		he := errorf(http.StatusInternalServerError, "the stored rule '%s' in domain '%s' is invalid", id, domain)
		he.cause = err
		return storedRule{}, false, he
	}
	r.Domain, r.ID = domain, id // the key is authoritative
	return storedRule{r: r, doc: kv.Value, rev: kv.ModRevision}, true, nil
}

// mustReadRule is readRule with 404 for a missing rule.
func (s *Server) mustReadRule(ctx context.Context, domain, id string) (storedRule, error) {
	sr, ok, err := s.readRule(ctx, domain, id)
	if err == nil && !ok {
		err = notFound(domain, id)
	}
	return sr, err
}

// ruleError turns an error of rule.ParseRule into an answer.
func ruleError(err error, size int) error {
	var ve *rule.ValidationError
	switch {
	case errors.As(err, &ve):
		he := errorf(http.StatusUnprocessableEntity, "invalid rule")
		for _, fe := range ve.Errors {
			he.body.Fields = append(he.body.Fields, adminapi.FieldError{Field: fe.Path, Reason: fe.Reason})
		}
		he.body.Omitted = ve.Omitted
		return he
	case errors.Is(err, rule.ErrTooLarge) && size > rule.MaxDocumentSize:
		return errorf(http.StatusRequestEntityTooLarge, "%v", err)
	}
	// rule.ErrSyntax, or a document nested too deeply.
	return errorf(http.StatusBadRequest, "%v", err)
}

func fieldError(field, reason string) error {
	he := errorf(http.StatusUnprocessableEntity, "invalid rule")
	he.body.Fields = []adminapi.FieldError{{Field: field, Reason: reason}}
	return he
}

// createRule serves POST /rate-limits.
func (s *Server) createRule(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	domain, err := s.domain(r)
	if err != nil {
		return err
	}
	rl, err := rule.ParseRule(body)
	if err != nil {
		return ruleError(err, len(body))
	}
	switch q := r.URL.Query().Get("domain"); {
	case rl.Domain == "":
		rl.Domain = domain
	case q != "" && rl.Domain != q:
		return fieldError("domain", "does not match ?domain="+q)
	}
	now := s.cfg.Now().UTC()
	rl.CreatedAt, rl.UpdatedAt = now, now
	doc, err := json.Marshal(&rl)
	if err != nil {
		return err
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	key := s.cfg.Layout.Rule(rl.Domain, rl.ID)
	rec := s.newRecord(r, now, adminapi.ActionCreate, rl.Domain, rl.ID, nil, doc)
	resp, err := s.commit(ctx, rec,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		clientv3.OpPut(key, string(doc)))
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return errorf(http.StatusConflict, "rule '%s' already exists in domain '%s'", rl.ID, rl.Domain)
	}
	s.changed(ctx, rec, resp.Header.Revision)
	loc := "/rate-limits/" + url.PathEscape(rl.ID)
	if rl.Domain != s.cfg.DefaultDomain {
		loc += "?domain=" + url.QueryEscape(rl.Domain)
	}
	w.Header().Set("Location", loc)
	w.Header().Set("ETag", etag(resp.Header.Revision))
	writeRaw(w, http.StatusCreated, doc)
	return nil
}

// listRules serves GET /rate-limits.
func (s *Server) listRules(w http.ResponseWriter, r *http.Request) error {
	prefix := s.cfg.Layout.Rules()
	if r.URL.Query().Get("domain") != "" {
		domain, err := s.domain(r)
		if err != nil {
			return err
		}
		prefix += domain + "/"
	}
	ctx, cancel := s.readCtx(r)
	defer cancel()
	resp, err := s.cfg.Etcd.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return etcdError("list rules", err)
	}
	list := adminapi.RuleList{Rules: make([]rule.Rule, 0, len(resp.Kvs))}
	for _, kv := range resp.Kvs {
		domain, id, err := s.cfg.Layout.ParseRule(string(kv.Key))
		var rl rule.Rule
		if err == nil {
			rl, err = rule.ParseRule(kv.Value)
		}
		if err != nil {
			// One bad document must not hide the others.
			s.log.Warn("skipping an invalid rule in etcd", "key", string(kv.Key), "err", err)
			continue
		}
		rl.Domain, rl.ID = domain, id
		list.Rules = append(list.Rules, rl)
	}
	sort.Slice(list.Rules, func(i, j int) bool {
		a, b := &list.Rules[i], &list.Rules[j]
		return a.Domain < b.Domain || a.Domain == b.Domain && a.ID < b.ID
	})
	writeJSON(w, http.StatusOK, list)
	return nil
}

// getRule serves GET /rate-limits/{rule_id}.
func (s *Server) getRule(w http.ResponseWriter, r *http.Request) error {
	domain, id, err := s.ruleRef(r)
	if err != nil {
		return err
	}
	ctx, cancel := s.readCtx(r)
	defer cancel()
	sr, err := s.mustReadRule(ctx, domain, id)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", etag(sr.rev))
	writeJSON(w, http.StatusOK, &sr.r)
	return nil
}

// updateRule serves PUT /rate-limits/{rule_id}: a partial update.
func (s *Server) updateRule(w http.ResponseWriter, r *http.Request) error {
	domain, id, err := s.ruleRef(r)
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	patch, err := parsePatch(body)
	if err != nil {
		return err
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	key := s.cfg.Layout.Rule(domain, id)
	for range maxAttempts {
		cur, err := s.mustReadRule(ctx, domain, id)
		if err != nil {
			return err
		}
		if err := checkIfMatch(r, cur.rev); err != nil {
			return err
		}
		rl, err := mergeRule(cur.doc, patch, domain, id)
		if err != nil {
			return err
		}
		now := s.cfg.Now().UTC()
		rl.CreatedAt, rl.UpdatedAt = cur.r.CreatedAt, now
		doc, err := json.Marshal(&rl)
		if err != nil {
			return err
		}
		rec := s.newRecord(r, now, adminapi.ActionUpdate, domain, id, cur.doc, doc)
		resp, err := s.commit(ctx, rec,
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", cur.rev)},
			clientv3.OpPut(key, string(doc)))
		if err != nil {
			return err
		}
		if resp.Succeeded {
			s.changed(ctx, rec, resp.Header.Revision)
			w.Header().Set("ETag", etag(resp.Header.Revision))
			writeRaw(w, http.StatusOK, doc)
			return nil
		}
	}
	return errorf(http.StatusConflict, "rule '%s' in domain '%s' kept changing; try again", id, domain)
}

// deleteRule serves DELETE /rate-limits/{rule_id}; the rule's share policy
// goes with it.
func (s *Server) deleteRule(w http.ResponseWriter, r *http.Request) error {
	domain, id, err := s.ruleRef(r)
	if err != nil {
		return err
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	key := s.cfg.Layout.Rule(domain, id)
	for range maxAttempts {
		cur, err := s.mustReadRule(ctx, domain, id)
		if err != nil {
			return err
		}
		if err := checkIfMatch(r, cur.rev); err != nil {
			return err
		}
		rec := s.newRecord(r, s.cfg.Now().UTC(), adminapi.ActionDelete, domain, id, cur.doc, nil)
		resp, err := s.commit(ctx, rec,
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", cur.rev)},
			clientv3.OpDelete(key), clientv3.OpDelete(s.cfg.Layout.Policy(domain, id)))
		if err != nil {
			return err
		}
		if resp.Succeeded {
			s.changed(ctx, rec, resp.Header.Revision)
			writeJSON(w, http.StatusOK, adminapi.Deleted{Message: "Rate limit rule '" + id + "' deleted successfully."})
			return nil
		}
	}
	return errorf(http.StatusConflict, "rule '%s' in domain '%s' kept changing; try again", id, domain)
}

// patchField is one top-level field of a PUT body.
type patchField struct {
	name  string
	value json.RawMessage
}

// parsePatch reads a PUT body: one JSON object, whose top-level fields it
// returns in order. A key repeated at any level is refused (422, each
// repeat at its path), as rule.ParseRule refuses them: the merge would
// otherwise keep one value silently.
func parsePatch(body []byte) ([]patchField, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	malformed := func(err error) error { return errorf(http.StatusBadRequest, "malformed JSON: %v", err) }
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, errorf(http.StatusBadRequest, "malformed JSON: empty body")
		}
		return nil, malformed(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errorf(http.StatusBadRequest, "want a JSON object of the fields to change")
	}
	var fields []patchField
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed(err)
		}
		name, _ := tok.(string) // the decoder allows only strings here
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, malformed(err)
		}
		fields = append(fields, patchField{name, v})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, malformed(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errorf(http.StatusBadRequest, "malformed JSON: data after the object")
	}
	repeats, err := document.RepeatedKeys(body, rule.Limits)
	if err != nil {
		return nil, ruleError(document.Wrap(err, rule.ErrSyntax, rule.ErrTooLarge), len(body))
	}
	if len(repeats) > 0 {
		var rep rule.Report
		document.ReportRepeats(&rep, repeats)
		return nil, ruleError(rep.Err(), len(body))
	}
	return fields, nil
}

// mergeRule applies a patch to the stored document of the rule domain/id
// and returns the result, validated whole. Top-level fields of the patch
// replace the stored ones, and null removes one (giving its default), as
// in a JSON merge patch (RFC 7396) one level deep. rule_id and domain may
// be given only unchanged (or null); created_at and updated_at are checked
// like any field but then set by the caller.
func mergeRule(stored []byte, patch []patchField, domain, id string) (rule.Rule, error) {
	doc := make(map[string]json.RawMessage)
	if err := json.Unmarshal(stored, &doc); err != nil {
		return rule.Rule{}, err // readRule parsed it: cannot happen
	}
	for _, f := range patch {
		var s *string
		switch f.name {
		case "rule_id":
			if json.Unmarshal(f.value, &s) != nil || s != nil && *s != id {
				return rule.Rule{}, fieldError("rule_id", "does not match the rule in the path ('"+id+"')")
			}
			continue
		case "domain":
			if json.Unmarshal(f.value, &s) != nil || s != nil && *s != domain {
				return rule.Rule{}, fieldError("domain", "cannot change (it is '"+domain+"'; create the rule in the other domain and delete this one)")
			}
			continue
		}
		if bytes.Equal(bytes.TrimSpace(f.value), []byte("null")) {
			delete(doc, f.name)
		} else {
			doc[f.name] = f.value
		}
	}
	idJSON, _ := json.Marshal(id)
	domainJSON, _ := json.Marshal(domain)
	doc["rule_id"], doc["domain"] = idJSON, domainJSON
	merged, err := json.Marshal(doc)
	if err != nil {
		// A value of the patch that the decoder took but the encoder
		// refuses; it is no rule either.
		return rule.Rule{}, errorf(http.StatusBadRequest, "malformed JSON: %v", err)
	}
	rl, err := rule.ParseRule(merged)
	if err != nil {
		return rule.Rule{}, ruleError(err, len(merged))
	}
	return rl, nil
}
