// Package adminclient is a typed Go client for Weir's admin API, which the
// coordinator serves: rules (create, read, partial update, delete), their
// statistics and live per-DC shares, the operator's share policy (pins,
// floors, ceilings, drains), a key's remaining quota in every DC, and the
// audit log. weirctl is built on it; other tools can use it directly.
//
// A Client authenticates with a bearer token and talks JSON:
//
//	c, err := adminclient.New("http://127.0.0.1:8070", token, nil)
//	r, etag, err := c.WithDomain("shop").GetRule(ctx, "api-per-ip")
//	r2, err := c.WithDomain("shop").UpdateRule(ctx, "api-per-ip", map[string]any{"limit": 150}, etag)
//
// Every answer other than 2xx is returned as an *APIError carrying the HTTP
// status, the server's message and, for invalid rules, the reason for each
// field. errors.Is matches it against ErrNotFound, ErrConflict,
// ErrPrecondition and the other sentinels by status. Writes that carry an
// ETag (UpdateRule, SetShares) are refused with ErrPrecondition when the
// resource changed since it was read; callers re-read and retry.
//
// An answer may also carry warnings (adminapi.HeaderWarning): the request
// was done, but perhaps not as meant, as when a share policy drains every
// DC. A client made with WithWarnings hands each to a function of the
// caller's; others drop them.
//
// Rules travel as rule.Rule, whose JSON is the API's rule document; share
// policies as sharepolicy.Policy; the other answers (statistics, shares,
// key status, audit records) as the documents of package adminapi, which
// the server writes with. Package adminclienttest serves the same
// contract from memory, for tests of code that uses this package.
package adminclient
