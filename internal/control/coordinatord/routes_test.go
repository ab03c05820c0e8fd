package coordinatord

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/kafka/usagetopic"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/internal/testkit/kafkatest"
	"github.com/weirhq/weir/internal/testkit/openapitest"
)

// TestAdminPortRoutesEveryDocumentedPath runs a coordinator with a token
// file and sends, on its admin port, a request to every path that
// docs/openapi/admin.yaml and docs/openapi/coordinator.yaml document
// (path parameters filled in): none may fall through to the ServeMux's
// own "404 page not found" — the admin port routes each to the server
// that answers it (which may well answer 404 for the rule it names, in
// JSON). A path the admin REST API serves but the admin port does not
// route (GET /overview and GET /cluster were such paths) fails here.
func TestAdminPortRoutesEveryDocumentedPath(t *testing.T) {
	etcd := etcdtest.Start(t)
	broker := kafkatest.Start(t, usagetopic.Name)
	tokens := tokenFile(t, "rw operator")
	admin := start(t, Config{
		Etcd: etcd.Endpoints(), Kafka: []string{broker.Addr()}, DCs: []string{"a", "b"},
		AdminAddr: "127.0.0.1:0", AdminTokenFile: tokens, DefaultDomain: "api", Name: "c1",
		Interval: 200 * time.Millisecond,
	})

	param := regexp.MustCompile(`\{[^}]+\}`)
	for _, doc := range []string{"docs/openapi/admin.yaml", "docs/openapi/coordinator.yaml"} {
		for _, op := range openapitest.Load(t, doc).Operations() {
			_, path, _ := strings.Cut(op, " ")
			url := "http://" + admin + param.ReplaceAllString(path, "probe")
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s (%s): %v", op, doc, err)
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode == http.StatusNotFound && string(body) == "404 page not found\n" {
				t.Errorf("%s (%s): the admin port does not route %s", op, doc, path)
			}
		}
	}
}
