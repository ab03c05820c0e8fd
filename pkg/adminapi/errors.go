package adminapi

// ErrorBody is the body of every answer other than 2xx:
//
//	{"error": "invalid rule", "fields": [{"field": "limit", "reason": "required"}]}
type ErrorBody struct {
	// Error says what went wrong, for a person to read.
	Error string `json:"error"`
	// Fields lists the problems of a refused document (422), one per
	// field, in the server's order.
	Fields []FieldError `json:"fields,omitempty"`
	// Omitted counts the problems beyond those listed in Fields.
	Omitted int `json:"omitted,omitempty"`
	// Leader is the admin URL of the coordinator that leads, when a 503
	// is for want of leadership and the server knows the leader (and, when
	// it has --peer-urls, the URL is among them); a 502 names the leader
	// it did not reach.
	Leader string `json:"leader,omitempty"`
}

// FieldError is one problem with one field of a refused document.
type FieldError struct {
	// Field is the path of the field, as rule.FieldError.Path ("limit",
	// "overrides[0].cidr"); empty for the document as a whole.
	Field string `json:"field"`
	// Reason says what is wrong, for a person to read.
	Reason string `json:"reason"`
}

// HeaderWarning is set on an answer, 2xx or not, to tell of something
// the server did that the caller may not have meant: today, on a 200 of
// PUT /rate-limits/{rule_id}/shares, that the policy accepted leaves every
// DC a share of 0. Its value is one warning for a person to read. An
// answer may carry several, one header field each: a warning may hold
// commas, so clients must not split a field, and servers must not join
// warnings into one field.
const HeaderWarning = "Weir-Warning"
