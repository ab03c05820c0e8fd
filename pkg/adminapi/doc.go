// Package adminapi declares the JSON documents of Weir's admin REST API
// (docs/admin-api.md): the bodies the coordinator's admin server writes and
// the client reads. They are declared here once, so that the server
// (internal/control/adminserver), the Go client (package adminclient),
// weirctl and the client test kit cannot drift apart.
//
// Rules travel as rule.Rule and share policies as sharepolicy.Policy, whose
// JSON is the API's; this package holds the other documents: error bodies,
// rule lists, statistics, live shares, key status and audit records.
//
// The package holds types only, no I/O; its values are plain data, safe to
// share once built.
package adminapi
