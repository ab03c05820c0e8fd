package adminserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/pkg/adminapi"
)

// Bounds of GET /audit and of the retention trim.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
	// trimBatch bounds the records one change trims, so that a change's
	// cost stays bounded however far behind retention is.
	trimBatch = 1000
	// auditPage is how many records GET /audit reads from etcd at once.
	auditPage = 256
)

// newRecord returns the audit record of a change the request makes at now.
func (s *Server) newRecord(r *http.Request, now time.Time, action, domain, id string, before, after []byte) adminapi.AuditRecord {
	var rnd [4]byte
	rand.Read(rnd[:]) // never fails (crypto/rand)
	return adminapi.AuditRecord{
		ID:     fmt.Sprintf("%020d-%s", max(now.UnixNano(), 0), hex.EncodeToString(rnd[:])),
		Time:   now,
		Actor:  principal(r),
		Action: action,
		Domain: domain,
		RuleID: id,
		Before: before,
		After:  after,
	}
}

// commit runs a change: if cmps hold, ops and the audit record rec are
// written in one transaction.
func (s *Server) commit(ctx context.Context, rec adminapi.AuditRecord, cmps []clientv3.Cmp, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	doc, err := json.Marshal(&rec)
	if err != nil {
		return nil, err
	}
	ops = append(ops, clientv3.OpPut(s.cfg.Layout.Audit()+rec.ID, string(doc)))
	resp, err := s.cfg.Etcd.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return nil, etcdError("commit "+rec.Action+" of "+rec.Domain+"/"+rec.RuleID, err)
	}
	return resp, nil
}

// changed logs a committed change and trims the audit log.
func (s *Server) changed(ctx context.Context, rec adminapi.AuditRecord, rev int64) {
	s.log.Info("admin change", "actor", rec.Actor, "action", rec.Action, "domain", rec.Domain, "rule", rec.RuleID, "revision", rev, "audit_id", rec.ID)
	if err := s.trimAudit(ctx); err != nil {
		s.log.Warn("audit trim failed; the next change retries", "err", err)
	}
}

// trimAudit deletes the oldest audit records beyond the retention, at most
// trimBatch of them.
func (s *Server) trimAudit(ctx context.Context) error {
	prefix := s.cfg.Layout.Audit()
	resp, err := s.cfg.Etcd.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("count audit records: %w", err)
	}
	excess := min(resp.Count-int64(s.cfg.AuditRetention), trimBatch)
	if excess <= 0 {
		return nil
	}
	resp, err = s.cfg.Etcd.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(excess))
	if err != nil {
		return fmt.Errorf("list the oldest audit records: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	first, last := string(resp.Kvs[0].Key), string(resp.Kvs[len(resp.Kvs)-1].Key)
	if _, err := s.cfg.Etcd.Delete(ctx, first, clientv3.WithRange(last+"\x00")); err != nil {
		return fmt.Errorf("delete the oldest audit records: %w", err)
	}
	return nil
}

// listAudit serves GET /audit?limit=N&rule_id=ID&domain=D: the newest
// records first, of the rule and domain when given.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit := DefaultAuditLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return errorf(http.StatusBadRequest, "limit %q is not a positive integer", v)
		}
		limit = min(n, MaxAuditLimit)
	}
	ruleID, domain := q.Get("rule_id"), q.Get("domain")
	ctx, cancel := s.readCtx(r)
	defer cancel()
	prefix := s.cfg.Layout.Audit()
	end := clientv3.GetPrefixRangeEnd(prefix)
	list := adminapi.AuditList{Records: []adminapi.AuditRecord{}}
	for len(list.Records) < limit {
		page := int64(auditPage)
		if ruleID == "" && domain == "" {
			page = int64(limit - len(list.Records))
		}
		resp, err := s.cfg.Etcd.Get(ctx, prefix, clientv3.WithRange(end),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(page))
		if err != nil {
			return etcdError("list audit records", err)
		}
		for _, kv := range resp.Kvs {
			var rec adminapi.AuditRecord
			if err := json.Unmarshal(kv.Value, &rec); err != nil {
				s.log.Warn("skipping an invalid audit record", "key", string(kv.Key), "err", err)
				continue
			}
			if (ruleID == "" || rec.RuleID == ruleID) && (domain == "" || rec.Domain == domain) && len(list.Records) < limit {
				list.Records = append(list.Records, rec)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		end = string(resp.Kvs[len(resp.Kvs)-1].Key) // exclusive: the next page is older
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}
