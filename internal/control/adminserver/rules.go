package adminserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/etcd/rulestore"
	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/document"
	"github.com/weirhq/weir/pkg/fielderr"
	"github.com/weirhq/weir/pkg/rule"
)

// maxAttempts bounds the read-merge-write loop of a change that meets
// concurrent changes (without If-Match); then 409.
const maxAttempts = 3

// storedRule is a rule as read from etcd.
type storedRule struct {
	r   rule.Rule // the version in force: the document, or its last valid version when the document is invalid
	doc []byte    // the document of r: the stored document, the shadow, or the version held in memory; nil when none is known
	raw []byte    // the stored document, as stored
	rev int64     // the stored document's mod revision
	bad error     // why the stored document is invalid; nil when it is valid
}

// known reports whether a valid version of the rule is known.
func (sr storedRule) known() bool { return sr.doc != nil }

// readRule reads a rule; ok is false when there is none. A rule whose
// document is invalid is answered with its last valid version (bad set):
// its shadow, or else the version this process holds in force
// (Config.Held); without either, doc is nil.
func (s *Server) readRule(ctx context.Context, domain, id string) (sr storedRule, ok bool, err error) {
	st, err := rulestore.Read(ctx, s.cfg.Etcd, s.cfg.Layout, domain, id)
	if err != nil {
		return storedRule{}, false, etcdError("read rule", err)
	}
	if !st.Exists() {
		return storedRule{}, false, nil
	}
	sr = storedRule{raw: st.Doc, rev: st.Revision, bad: st.Err}
	r, kept := st.InForce()
	switch {
	case st.Err == nil:
		sr.r, sr.doc = r, st.Doc
	case kept:
		sr.r, sr.doc = r, st.Shadow
	default:
		if h, ok := s.held(domain, id); ok {
			sr.r, sr.doc = h.Version, h.Document
		}
	}
	return sr, true, nil
}

// held returns the last valid version this process holds in force for
// the rule domain/id, whose stored document is invalid.
func (s *Server) held(domain, id string) (rulestore.Held, bool) {
	if s.cfg.Held == nil {
		return rulestore.Held{}, false
	}
	h, ok := s.cfg.Held(domain, id)
	return h, ok && h.Kept && h.Document != nil
}

// mustReadRule is readRule with 404 for a missing rule and 409 for one
// whose document is invalid with no valid version known: there is
// nothing to show, only a whole rule to PUT in its place or a DELETE.
func (s *Server) mustReadRule(ctx context.Context, domain, id string) (storedRule, error) {
	sr, ok, err := s.readRule(ctx, domain, id)
	switch {
	case err != nil:
		return sr, err
	case !ok:
		return sr, notFound(domain, id)
	case !sr.known():
		s.log.Warn("invalid rule in etcd, with no valid version known", "domain", domain, "rule", id, "err", sr.bad)
		return sr, unknownVersion(domain, id, sr.bad)
	}
	return sr, nil
}

// unknownVersion is the answer about a rule whose stored document is
// invalid and of which no valid version is known.
func unknownVersion(domain, id string, bad error) error {
	return errorf(http.StatusConflict, "the stored document of rule '%s' in domain '%s' is invalid (%v) and no valid version of it is known: PUT the whole rule to replace the document, or DELETE the rule", id, domain, bad)
}

// encodeRule returns the document to store for rl: one that every reader
// takes (rulestore.Encode), or the answer that refuses it.
func encodeRule(rl rule.Rule) ([]byte, error) {
	doc, err := rulestore.Encode(rl)
	switch {
	case err == nil:
		return doc, nil
	case errors.Is(err, rulestore.ErrTooLarge):
		return nil, errorf(http.StatusRequestEntityTooLarge, "the rule's document would be larger than limiters read (%d bytes): %v", rulestore.MaxDocumentBytes, err)
	}
	var ve *rule.ValidationError
	if errors.As(err, &ve) {
		return nil, ruleError(ve, 0)
	}
	return nil, errorf(http.StatusUnprocessableEntity, "invalid rule: %v", err)
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

// checkShareDCs refuses, with 422 naming each, the DCs of rl's static
// shares that are not among Config.DCs, as PUT /rate-limits/{id}/shares
// refuses them in a share policy: a share for a DC no limiter runs in
// would be quota nobody can use. Without Config.DCs the server knows no
// DC to compare with and accepts any.
func (s *Server) checkShareDCs(rl rule.Rule) error {
	if len(s.cfg.DCs) == 0 {
		return nil
	}
	var unknown []string
	for dc := range rl.Shares {
		if !slices.Contains(s.cfg.DCs, dc) {
			unknown = append(unknown, dc)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	he := errorf(http.StatusUnprocessableEntity, "invalid rule")
	for _, dc := range unknown {
		he.body.Fields = append(he.body.Fields, adminapi.FieldError{
			Field: fielderr.Key("shares", dc), Reason: fmt.Sprintf("unknown DC %q (known: %s)", dc, strings.Join(s.cfg.DCs, ", ")),
		})
	}
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
	if err := s.checkShareDCs(rl); err != nil {
		return err
	}
	now := s.cfg.Now().UTC()
	rl.CreatedAt, rl.UpdatedAt = now, now
	doc, err := encodeRule(rl)
	if err != nil {
		return err
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	key := s.cfg.Layout.Rule(rl.Domain, rl.ID)
	rec := s.newRecord(r, now, adminapi.ActionCreate, rl.Domain, rl.ID, nil, doc)
	resp, err := s.commit(ctx, rec,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		rulestore.PutOps(s.cfg.Layout, rl.Domain, rl.ID, doc)...)
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
	resp, err := s.cfg.Etcd.Txn(ctx).Then(
		clientv3.OpGet(prefix, clientv3.WithPrefix()),
		clientv3.OpGet(s.cfg.Layout.ValidRules()+strings.TrimPrefix(prefix, s.cfg.Layout.Rules()), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return etcdError("list rules", err)
	}
	docs, shadows := resp.Responses[0].GetResponseRange().GetKvs(), resp.Responses[1].GetResponseRange().GetKvs()
	valid := make(map[string]rule.Rule, len(shadows))
	for _, kv := range shadows {
		if domain, id, err := s.cfg.Layout.ParseValidRule(string(kv.Key)); err == nil {
			if rl, err := rulestore.Decode(domain, id, kv.Value); err == nil {
				valid[domain+"/"+id] = rl
			}
		}
	}
	list := adminapi.RuleList{Rules: make([]rule.Rule, 0, len(docs))}
	for _, kv := range docs {
		domain, id, err := s.cfg.Layout.ParseRule(string(kv.Key))
		if err != nil {
			s.log.Warn("skipping a key of no known shape under the rules", "key", string(kv.Key))
			continue
		}
		rl, err := rulestore.Decode(domain, id, kv.Value)
		if err == nil {
			list.Rules = append(list.Rules, rl)
			continue
		}
		// One bad document must not hide the others: it is listed apart,
		// and its last valid version, in force, with the rules — the
		// shadow, or else the version this coordinator holds in memory.
		bad := adminapi.InvalidRule{Domain: domain, RuleID: id, Error: err.Error()}
		if rl, ok := valid[domain+"/"+id]; ok {
			list.Rules = append(list.Rules, rl)
			bad.InForce, bad.UpdatedAt, bad.Kept = true, rl.UpdatedAt, adminapi.KeptShadow
		} else if h, ok := s.held(domain, id); ok {
			list.Rules = append(list.Rules, h.Version)
			bad.InForce, bad.UpdatedAt, bad.Kept = true, h.Version.UpdatedAt, adminapi.KeptMemory
		}
		list.Invalid = append(list.Invalid, bad)
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
	if sr.bad != nil {
		w.Header().Set(adminapi.HeaderInvalidDocument, headerValue(sr.bad.Error()))
	}
	writeJSON(w, http.StatusOK, &sr.r)
	return nil
}

// updateRule serves PUT /rate-limits/{rule_id}: a partial update. Over
// an invalid document it patches the last valid version known; when none
// is known the body must be a whole valid rule, which replaces the
// document (created_at is then unknown and set to now).
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
		cur, ok, err := s.readRule(ctx, domain, id)
		switch {
		case err != nil:
			return err
		case !ok:
			return notFound(domain, id)
		}
		if err := checkIfMatch(r, cur.rev); err != nil {
			return err
		}
		base := cur.doc
		if !cur.known() {
			base = []byte("{}")
		}
		rl, err := mergeRule(base, patch, domain, id)
		if err != nil {
			return err
		}
		// Shares stored before a DC left the configuration do not block
		// other changes; shares written now must name known DCs.
		if slices.ContainsFunc(patch, func(f patchField) bool { return f.name == "shares" }) {
			if err := s.checkShareDCs(rl); err != nil {
				return err
			}
		}
		now := s.cfg.Now().UTC()
		rl.CreatedAt, rl.UpdatedAt = cur.r.CreatedAt, now
		if !cur.known() {
			rl.CreatedAt = now
		}
		doc, err := encodeRule(rl)
		if err != nil {
			return err
		}
		rec := s.newRecord(r, now, adminapi.ActionUpdate, domain, id, auditDoc(cur.raw), doc)
		resp, err := s.commit(ctx, rec,
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", cur.rev)},
			rulestore.PutOps(s.cfg.Layout, domain, id, doc)...)
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
		// A rule whose document is invalid, kept version or not, can be
		// deleted.
		cur, ok, err := s.readRule(ctx, domain, id)
		if !ok {
			if err == nil {
				err = notFound(domain, id)
			}
			return err
		}
		if err := checkIfMatch(r, cur.rev); err != nil {
			return err
		}
		rec := s.newRecord(r, s.cfg.Now().UTC(), adminapi.ActionDelete, domain, id, auditDoc(cur.raw), nil)
		resp, err := s.commit(ctx, rec,
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", cur.rev)},
			append(rulestore.DeleteOps(s.cfg.Layout, domain, id), clientv3.OpDelete(s.cfg.Layout.Policy(domain, id)))...)
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
// otherwise keep one value silently. A body that is not valid UTF-8 is
// refused (400) before decoding, which would turn a field name's bad
// bytes into U+FFFD.
func parsePatch(body []byte) ([]patchField, error) {
	if err := document.CheckUTF8(body); err != nil {
		return nil, ruleError(document.Wrap(err, rule.ErrSyntax, rule.ErrTooLarge), len(body))
	}
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

// headerValue makes s fit in a header value: control characters become
// spaces and it is cut at 1,024 bytes.
func headerValue(s string) string {
	b := []byte(s)
	if len(b) > 1024 {
		b = b[:1024]
	}
	for i, c := range b {
		if c < ' ' || c == 0x7f {
			b[i] = ' '
		}
	}
	return strings.ToValidUTF8(string(b), "")
}

// auditDoc returns a stored document as an audit record holds it: as is
// when it is JSON, else (a corrupt document) as a JSON string, or only
// its size when it is larger than any valid rule.
func auditDoc(raw []byte) []byte {
	switch {
	case len(raw) > rulestore.MaxDocumentBytes:
		b, _ := json.Marshal(fmt.Sprintf("(an invalid document of %d bytes)", len(raw)))
		return b
	case json.Valid(raw):
		return raw
	}
	b, _ := json.Marshal(strings.ToValidUTF8(string(raw), "\uFFFD"))
	return b
}
