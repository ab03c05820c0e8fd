package adminapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// The actions of audit records.
const (
	ActionCreate = "create"
	ActionUpdate = "update"
	ActionDelete = "delete"
	ActionShares = "shares"
)

// AuditRecord is one successful change made through the admin API, as GET
// /audit lists it. The server keeps each in etcd, written in the same
// transaction as its change.
type AuditRecord struct {
	// ID is the Unix time of the change in nanoseconds, 20 digits
	// zero-padded, a '-' and 8 random hex digits: IDs sort by time (as far
	// as the coordinators' clocks agree).
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
	// Actor is the name of the principal that made the change,
	// "anonymous" without one.
	Actor string `json:"actor"`
	// Action is ActionCreate, ActionUpdate, ActionDelete or ActionShares.
	Action string `json:"action"`
	Domain string `json:"domain"`
	RuleID string `json:"rule_id"`
	// Before and After are the rule (or, for ActionShares, the share
	// policy) before and after the change; null when absent.
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// UnmarshalJSON reads a record whose id is a string or, from servers that
// number their records, a number.
func (a *AuditRecord) UnmarshalJSON(b []byte) error {
	type plain AuditRecord
	var r struct {
		plain
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return err
	}
	*a = AuditRecord(r.plain)
	a.ID = ""
	if len(r.ID) > 0 && !bytes.Equal(r.ID, []byte("null")) {
		if err := json.Unmarshal(r.ID, &a.ID); err != nil {
			var n json.Number
			if err := json.Unmarshal(r.ID, &n); err != nil {
				return fmt.Errorf("audit record id: want a string or a number, got %s", r.ID)
			}
			a.ID = n.String()
		}
	}
	return nil
}

// AuditList is the body of GET /audit: the newest records first.
type AuditList struct {
	Records []AuditRecord `json:"records"`
}
