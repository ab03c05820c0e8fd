// Package console is the operators' console: a few web pages the
// coordinator serves under /ui/ on its admin port (SPEC §5, issue 16).
//
// Pages: Overview (every rule, its per-DC shares and recent traffic),
// Rule (charts of demand, shares and admitted traffic over the last 15
// minutes, keys with shares of their own, the definition, the audit
// trail), Shares (pin, floor, ceiling or drain a DC, with a preview
// computed by package allocate before applying) and Cluster (the
// coordinators and each DC's limiter instances).
//
// The pages are rendered on the server (html/template) and read without
// JavaScript; a small embedded script only refreshes them every planning
// interval. Styles, script and the SVG charts (package svgchart) are made
// here and embedded: the console loads nothing from elsewhere.
//
// The console reads and writes nothing itself: every figure and every
// change goes through the admin API (Config.API), called in-process with
// the signed-in operator's bearer token. So the console has the admin
// API's authentication and authorisation exactly — a read-only token sees
// everything and changes nothing — and, on a standby, the admin API's
// answer (forwarded to the leader, or naming it).
//
// Sign-in takes a token of the admin API's token file and opens a session:
// the browser gets a random session id in a cookie that is HttpOnly,
// SameSite=Strict and, with Config.Secure, Secure with the __Host- prefix;
// the token stays in the Console's memory. A session ends at sign-out,
// after Config.SessionIdle unused or Config.SessionLifetime in all, when
// its token leaves the token file, or when Config.MaxSessions newer ones
// push it out; the Console's sessions die with it. Every form that changes
// something carries a CSRF token derived from the session (an HMAC of the
// session id under a per-process key), checked on submission, and
// requests whose Origin is another site are refused.
//
// A form's write ends with a redirect; the admin API's warnings of the
// write (adminapi.HeaderWarning) are kept in the session, on the server,
// and shown once by the next page the session renders (not by the
// script's refreshes, RefreshHeader). Links to coordinators' admin URLs,
// which come from etcd, are made only to those Config.PeerAllowed allows
// (the coordinator's --peer-urls).
package console
