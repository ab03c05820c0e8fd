package adminapi

import "github.com/weirhq/weir/pkg/rule"

// RuleList is the body of GET /rate-limits: rules sorted by domain and
// rule_id, each carrying its domain.
type RuleList struct {
	Rules []rule.Rule `json:"rules"`
}

// Deleted is the body of DELETE /rate-limits/{rule_id}.
type Deleted struct {
	// Message confirms the deletion: "Rate limit rule '<id>' deleted
	// successfully."
	Message string `json:"message"`
}
