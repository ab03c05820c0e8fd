package envoyrls_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/dc/envoyrls"
	"github.com/weirhq/weir/pkg/document"
	"github.com/weirhq/weir/pkg/document/yamldoc"
	"github.com/weirhq/weir/pkg/rulefile"
)

// at walks n along keys (an object's field) and indices (a list's item).
func at(n *document.Node, path ...any) *document.Node {
	for _, p := range path {
		if n == nil {
			return nil
		}
		switch p := p.(type) {
		case string:
			n, _ = n.Get(p)
		case int:
			if n.Kind != document.List || p >= len(n.Items) {
				return nil
			}
			n = n.Items[p]
		}
	}
	return n
}

// findAll returns every object under n that has the field key.
func findAll(n *document.Node, key string) []*document.Node {
	var out []*document.Node
	if n == nil {
		return nil
	}
	if _, ok := n.Get(key); ok && n.Kind == document.Object {
		out = append(out, n)
	}
	for _, it := range n.Items {
		out = append(out, findAll(it, key)...)
	}
	for _, f := range n.Fields {
		out = append(out, findAll(f.Value, key)...)
	}
	return out
}

// TestDeployEnvoy checks the example Envoy bootstrap of deploy/envoy as
// far as this machine allows (no Envoy binary): its rate limit filter
// names a cluster that reaches the limiter's gRPC port over HTTP/2 and
// health-checks Weir's service, and its config directory loads.
func TestDeployEnvoy(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "deploy", "envoy")
	data, err := os.ReadFile(filepath.Join(dir, "envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := yamldoc.Parse(data, document.Limits{})
	if err != nil {
		t.Fatalf("parse envoy.yaml: %v", err)
	}
	var cluster string
	for _, f := range findAll(doc, "rate_limit_service") {
		if tv := at(f, "@type"); tv == nil || !strings.HasSuffix(tv.Text, "envoy.extensions.filters.http.ratelimit.v3.RateLimit") {
			continue
		}
		if v := at(f, "rate_limit_service", "transport_api_version"); v == nil || v.Text != "V3" {
			t.Errorf("transport_api_version: got %v, want V3", v)
		}
		if c := at(f, "rate_limit_service", "grpc_service", "envoy_grpc", "cluster_name"); c != nil {
			cluster = c.Text
		}
	}
	if cluster == "" {
		t.Fatal("got no ratelimit filter naming a cluster, want one")
	}
	var found bool
	for _, c := range at(doc, "static_resources", "clusters").Items {
		if n := at(c, "name"); n == nil || n.Text != cluster {
			continue
		}
		found = true
		if at(c, "typed_extension_protocol_options", "envoy.extensions.upstreams.http.v3.HttpProtocolOptions", "explicit_http_config", "http2_protocol_options") == nil {
			t.Errorf("cluster %s: got no HTTP/2, want it (gRPC)", cluster)
		}
		if p := at(c, "load_assignment", "endpoints", 0, "lb_endpoints", 0, "endpoint", "address", "socket_address", "port_value"); p == nil || p.Text != "9090" {
			t.Errorf("cluster %s: got port %v, want the limiter's gRPC port 9090", cluster, p)
		}
		if s := at(c, "health_checks", 0, "grpc_health_check", "service_name"); s == nil || s.Text != envoyrls.ServiceName {
			t.Errorf("cluster %s: got health-checked service %v, want %s", cluster, s, envoyrls.ServiceName)
		}
	}
	if !found {
		t.Errorf("got no cluster %q, want the one the filter names", cluster)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "ratelimit", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("got no config directory, want deploy/envoy/ratelimit")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if e, err := rulefile.ParseConfig(data); err != nil || e.Tree == nil {
			t.Errorf("%s: got %v, tree %v; want an envoyproxy/ratelimit configuration that loads", f, err, e.Tree)
		}
	}
}
