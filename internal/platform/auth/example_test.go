package auth_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/weirhq/weir/internal/platform/auth"
)

func ExampleMiddleware() {
	tokens, err := auth.Parse([]byte(`
# TOKEN                            MODE NAME
9f2c1e7a55d04b0b8e1d3c6a7f0e2b14   rw   deploy-bot
0c4b8e2f9a1d4e6b8c3f5a7d9e1b2c4d   ro   grafana
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	h := auth.Middleware(tokens, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := auth.FromContext(r.Context())
		fmt.Fprintf(w, "hello %s", p.Name)
	}))
	for _, c := range []struct{ method, token string }{
		{"GET", "9f2c1e7a55d04b0b8e1d3c6a7f0e2b14"},
		{"DELETE", "0c4b8e2f9a1d4e6b8c3f5a7d9e1b2c4d"},
		{"GET", "not-a-token-of-this-file"},
	} {
		req := httptest.NewRequest(c.method, "/rate-limits", nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(c.method, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// GET 200 hello deploy-bot
	// DELETE 403 {"error":"the token of grafana is read-only"}
	// GET 401 {"error":"invalid bearer token"}
}

func ExampleParse_errors() {
	_, err := auth.Parse([]byte("9f2c1e7a55d04b0b8e1d3c6a7f0e2b14 admin\nshort\n"))
	fmt.Println(err)
	// Output:
	// auth: invalid token file: line 1: second field is not "rw" or "ro" (want TOKEN [rw|ro] [NAME]); line 2: token shorter than 16 characters
}
