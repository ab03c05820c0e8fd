// Package auth authenticates the callers of Weir's admin API with bearer
// tokens (SPEC §5: "the admin API requires authentication; secrets never
// appear in logs").
//
// Tokens are kept in a token file, one a line:
//
//	# TOKEN                              MODE  NAME
//	9f2c1e7a55d04b0b8e1d3c6a7f0e2b14     rw    deploy-bot
//	0c4b8e2f9a1d4e6b8c3f5a7d9e1b2c4d     ro    grafana
//	e1d2c3b4a5f60718293a4b5c6d7e8f90
//
// TOKEN is 16 to 4,096 characters of printable ASCII without spaces. MODE
// is "rw" (read-write, the default) or "ro" (read-only: GET and HEAD only).
// NAME names the holder in audit records and logs: 1 to 64 characters of
// letters, digits, '.', '_', '-', '@' and '+'; it defaults to "token-N",
// N the line number, and "anonymous" is reserved. A MODE must come before a
// NAME. Blank lines and lines whose first non-blank character is '#' are
// ignored ('#' elsewhere is part of the field it is in). Tokens and names
// must be unique.
//
// Parse reads such a file and reports every malformed line with its number
// and what is wrong, never with the line's content, so that an error
// message cannot leak a token. File keeps a token file's tokens in force
// and re-reads the file when it changes; a file with any error is refused
// as a whole and the tokens read before stay in force.
//
// Middleware puts a Store (a *File or *Tokens) in front of an http.Handler:
// a request without a valid "Authorization: Bearer TOKEN" header is
// answered 401 with a WWW-Authenticate challenge, a read-only principal's
// request of any method but GET and HEAD 403, both with a JSON body
// {"error": "..."}; any other request reaches the handler with its
// Principal in the context (FromContext).
//
// Tokens are kept only as SHA-256 digests and compared in constant time
// (digest against digest, so that not even their length leaks); they are
// never logged or formatted into errors.
package auth
