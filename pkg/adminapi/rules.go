package adminapi

import (
	"time"

	"github.com/weirhq/weir/pkg/rule"
)

// RuleList is the body of GET /rate-limits: rules sorted by domain and
// rule_id, each carrying its domain. Rules holds the version of each rule
// in force: for a rule whose stored document is invalid, its last valid
// version, if one is kept; Invalid lists those rules.
type RuleList struct {
	Rules   []rule.Rule   `json:"rules"`
	Invalid []InvalidRule `json:"invalid,omitempty"`
}

// InvalidRule is a rule whose stored document is invalid (written into
// etcd by other means than the admin API). Until an operator fixes it
// (PUT, which patches the version in force, or replaces the document
// with a whole rule when no version is known) or deletes it, limiters
// enforce and coordinators plan its last valid version, if one is kept.
type InvalidRule struct {
	Domain string `json:"domain"`
	RuleID string `json:"rule_id"`
	// Error says why the stored document is invalid.
	Error string `json:"error"`
	// InForce tells whether a last valid version is kept (and listed in
	// RuleList.Rules); UpdatedAt is its updated_at. Without one, processes
	// started since the corruption do not enforce the rule.
	InForce   bool      `json:"in_force"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Kept says where the version in force was found: KeptShadow, the
	// rule's shadow in etcd, which every process reads; or KeptMemory,
	// only the memory of the coordinator that answered (the shadow is
	// invalid or missing): processes that had it in force before keep
	// enforcing it, those started since do not until the leading
	// coordinator puts it back as the shadow, which it does within an
	// interval when it knows it too. Empty when not in force.
	Kept string `json:"kept,omitempty"`
}

// Values of InvalidRule.Kept.
const (
	KeptShadow = "shadow"
	KeptMemory = "memory"
)

// HeaderInvalidDocument is set on the answer to GET /rate-limits/{rule_id}
// when the rule's stored document is invalid: its value says why, and the
// body is the last valid version, the one in force.
const HeaderInvalidDocument = "Weir-Invalid-Document"

// Deleted is the body of DELETE /rate-limits/{rule_id}.
type Deleted struct {
	// Message confirms the deletion: "Rate limit rule '<id>' deleted
	// successfully."
	Message string `json:"message"`
}
