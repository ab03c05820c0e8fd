package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
)

// TestGetShowsCorruptRule has a rule's stored document corrupted by hand
// behind the admin API: weirctl get, listing or showing the rule, warns
// that the document is invalid and which version is in force.
func TestGetShowsCorruptRule(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	api, err := adminserver.New(adminserver.Config{Etcd: cli, DefaultDomain: "api"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()
	vars := map[string]string{"WEIR_SERVER": srv.URL, "WEIR_TOKEN": rwToken} // the API itself checks no token here
	weirctl := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(context.Background(), env2(args, &out, &errOut, vars)); code != exitOK {
			t.Fatalf("weirctl %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
		}
		return out.String()
	}
	var create bytes.Buffer
	create.WriteString(`{"rule_id":"orders","key_type":"user","limit":10,"window_seconds":60}`)
	resp, err := srv.Client().Post(srv.URL+"/rate-limits", "application/json", &create)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := cli.Put(context.Background(), etcdlayout.Layout{}.Rule("api", "orders"), `{"rule_id":"orders","limit":-10}`); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"get"}, []string{"WARNING: rule orders in domain api: stored document invalid", "in force: its last valid version", "orders"}},
		{[]string{"get", "orders"}, []string{"WARNING: the stored document of rule orders is invalid", "limit", "10"}},
		{[]string{"get", "-o", "json"}, []string{`"invalid": [`, `"rule_id": "orders"`, `"in_force": true`}},
	} {
		out := weirctl(tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("weirctl %v: got\n%s\nwant it to contain %q", tc.args, out, w)
			}
		}
	}
}
