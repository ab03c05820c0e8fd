package auth

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
)

// Store looks up the principal holding a token. *File and *Tokens are
// Stores. Lookup must be safe for concurrent use and must not log the
// token.
type Store interface {
	Lookup(token string) (Principal, bool)
}

var (
	_ Store = (*File)(nil)
	_ Store = (*Tokens)(nil)
)

// Realm is the realm of the WWW-Authenticate challenges.
const Realm = "weir"

// Middleware authenticates every request to next with a bearer token from
// store:
//
//   - no "Authorization: Bearer TOKEN" header (or more than one): 401,
//     WWW-Authenticate: Bearer realm="weir";
//   - an unknown token: 401, WWW-Authenticate: Bearer realm="weir",
//     error="invalid_token";
//   - a read-only principal and a method other than GET and HEAD: 403,
//     WWW-Authenticate: Bearer realm="weir", error="insufficient_scope";
//   - otherwise next serves the request, whose context carries the
//     principal (FromContext).
//
// Refusals have a JSON body {"error": "..."} that never holds the token.
// The scheme name is matched without regard to case (RFC 7235); tokens in
// the query string are not accepted.
func Middleware(store Store, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r.Header)
		if !ok {
			refuse(w, http.StatusUnauthorized, `Bearer realm="`+Realm+`"`, "missing bearer token")
			return
		}
		p, ok := store.Lookup(token)
		if !ok {
			refuse(w, http.StatusUnauthorized, `Bearer realm="`+Realm+`", error="invalid_token"`, "invalid bearer token")
			return
		}
		if p.ReadOnly && r.Method != http.MethodGet && r.Method != http.MethodHead {
			refuse(w, http.StatusForbidden, `Bearer realm="`+Realm+`", error="insufficient_scope"`,
				"the token of "+p.Name+" is read-only")
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), p)))
	})
}

// bearer returns the token of the request's one Authorization header, if
// it has the Bearer scheme.
func bearer(h http.Header) (string, bool) {
	v := h.Values("Authorization")
	if len(v) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(v[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func refuse(w http.ResponseWriter, code int, challenge, msg string) {
	h := w.Header()
	h.Set("WWW-Authenticate", challenge)
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

type contextKey struct{}

// NewContext returns a copy of ctx that carries p.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, contextKey{}, p)
}

// FromContext returns the principal ctx carries, put there by Middleware
// or NewContext.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(contextKey{}).(Principal)
	return p, ok
}
