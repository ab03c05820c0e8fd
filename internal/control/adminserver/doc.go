// Package adminserver serves Weir's admin REST API (SPEC §5, seed 003 §5):
// rules, their share policies and their live state, over HTTP and JSON,
// kept in etcd. Every coordinator serves it; writes go straight to etcd, so
// any coordinator can take them, and the limiters and the leader pick the
// changes up from there. The JSON documents it answers with are declared
// in package adminapi (pkg/adminapi), which the client shares.
//
// # Endpoints
//
// Rules are named by rule_id in the path and by domain in ?domain= (default
// Config.DefaultDomain, "default"). Rule documents are those of package
// rule (docs/rules.md); seed 003's bodies are accepted as they are.
//
//	POST   /rate-limits                    create a rule: 201 with the stored rule, ETag and Location;
//	                                       409 if it exists; 422 if invalid. The domain is the body's
//	                                       "domain", else ?domain=, else the default (both given must agree).
//	GET    /rate-limits                    200 {"rules": [...]} of every domain, or of ?domain= only,
//	                                       sorted by domain and rule_id
//	GET    /rate-limits/{rule_id}          200 the rule, with ETag; 404
//	PUT    /rate-limits/{rule_id}          partial update: 200 the rule, with ETag; 404, 412, 409, 422
//	DELETE /rate-limits/{rule_id}          200 {"message": "Rate limit rule '<id>' deleted successfully."};
//	                                       the rule's share policy is deleted with it; 404, 412, 409
//	GET    /rate-limits/{rule_id}/stats    200 seed 003's statistics plus "dcs": {dc: {total_requests,
//	                                       rejected_requests}}, from Live; 404, 503
//	GET    /rate-limits/{rule_id}/shares   200 {"domain", "rule_id", "dcs": [{dc, demand, share, target,
//	                                       admitted, pin, floor, ceiling, drained}], "etag"}: Live's view
//	                                       with the stored policy; 404, 422 for a local rule, 503
//	PUT    /rate-limits/{rule_id}/shares   replace the share policy (package sharepolicy):
//	                                       {"dcs": {"eu": {"pin": 0.5}, "us": {"floor": 0.1, "ceiling": 0.8},
//	                                       "ap": {"drained": true}}}: 200 the stored policy, with ETag;
//	                                       404, 412, 409, 422 (invalid, unknown DC, local rule)
//	GET    /rate-limits/{rule_id}/{key}    200 {"domain", "rule_id", "key", "dcs": [{dc, limit, remaining,
//	                                       window_seconds, reset_time}]}: seed 003's status of a key, per
//	                                       DC, from Live; 404, 503. The key is the rest of the path and may
//	                                       hold '/'; keys named "stats" and "shares" are shadowed.
//	GET    /audit?limit=N&rule_id=&domain= 200 {"records": [...]}, newest first; limit 100 by default, at
//	                                       most 1,000; the filters are optional
//	GET    /rate-limits/{rule_id}/series   200 the rule's per-DC demand, shares and counts over the last
//	                                       15 minutes (the console's charts); 404, 503
//	GET    /overview                       200 every planned global rule's shares and recent counts; 503
//	GET    /cluster                        200 the coordinators, and each DC's limiter instances with
//	                                       their applied revision and last report; 503
//
// docs/openapi/admin.yaml describes every route with its status codes and
// schemas; TestOpenAPI holds it to the server. A request naming no domain
// gets the default one if it holds the rule, else the only one that does
// (409 when several other domains do); a standby forwards the live views
// to the leader (Config.Forward), only to a leader URL among Config.Peers
// when those are set, and names in a 503 no leader URL outside them.
//
// Every error is JSON {"error": "..."}: 400 for malformed JSON or query
// parameters, 404 for unknown rules and paths, 405 (with Allow) for a
// method a path does not take, 413 for a body over Config.MaxBodyBytes (or
// a change larger than etcd accepts), 422 for an invalid rule, with every
// problem listed: {"error": "invalid rule", "fields": [{"field": "limit",
// "reason": "..."}]}, 503 when etcd or the live view cannot answer (with
// "leader" and a Location header when another coordinator leads and is
// known, and Config.Peers, if set, allow its URL).
//
// # Partial updates
//
// The fields of a PUT body replace the stored rule's; a field set to null
// is removed and takes its default (a JSON merge patch, RFC 7396, one level
// deep). rule_id and domain may appear only unchanged; a rule moves to
// another domain by creating it there and deleting it here. The result is
// validated whole, as a new rule would be (422), and stored with the old
// created_at and updated_at set to now.
//
// # Concurrency
//
// Every rule and policy answer carries ETag: "<etcd mod revision of the
// key>". PUT and DELETE take If-Match (a list of tags, or "*" for "exists";
// the tag "0" of an absent policy matches only while there is none) and
// answer 412 Precondition Failed when it does not match. Every write is an
// etcd transaction conditional on the mod revision it read, so a
// concurrent change is never lost: without If-Match the read-merge-write is
// retried up to three times, then answered 409 Conflict.
//
// # Audit
//
// Every successful change appends an AuditRecord at Layout.Audit()+id, in
// the same etcd transaction as the change, so there is no change without
// its record and no record without its change: {id, time, actor, action
// ("create", "update", "delete" or "shares"), domain, rule_id, before,
// after}, before and after being the documents (null when absent). The
// actor is the principal that package auth's middleware put in the
// request's context ("anonymous" without one); the id is the time in Unix
// nanoseconds, 20 digits, "-" and 8 random hex digits, so records sort by
// time. Each change is also logged in one line (actor, action, domain,
// rule, revision). After each change the oldest records beyond
// Config.AuditRetention (10,000) are deleted, at most 1,000 at a time.
//
// # Authentication
//
// The Server authenticates no one: wrap it in auth.Middleware (read-only
// tokens then get the GET endpoints only). It never sees tokens, and logs
// principals by name.
package adminserver
