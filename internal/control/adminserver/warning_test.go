package adminserver_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/weirhq/weir/pkg/adminclient"
	"github.com/weirhq/weir/pkg/sharepolicy"
)

// TestClientWarnings checks that the Go client hands the caller the
// warnings this server sends: a share policy that drains every DC is
// stored and warned about, once; the other requests warn of nothing.
func TestClientWarnings(t *testing.T) {
	e := newEnv(t)
	hs := httptest.NewServer(e.h)
	defer hs.Close()
	ctx := context.Background()
	base, err := adminclient.New(hs.URL, "", hs.Client())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	c := base.WithWarnings(func(w string) { got = append(got, w) })

	drained := sharepolicy.DCPolicy{Drained: true}
	const allDrained = "every DC is drained or pinned at 0: rule 'api-global-default' in domain 'default' rejects every request in every DC"
	tests := []struct {
		name string
		call func() error
		want []string
	}{
		{"create", func() error { _, err := c.CreateRule(ctx, mustRule(t, seedCreate)); return err }, nil},
		{"drain one DC", func() error {
			_, err := c.SetShares(ctx, "api-global-default", sharepolicy.Policy{DCs: map[string]sharepolicy.DCPolicy{"us-east": drained}}, "")
			return err
		}, nil},
		{"drain every DC", func() error {
			_, err := c.SetShares(ctx, "api-global-default", sharepolicy.Policy{DCs: map[string]sharepolicy.DCPolicy{
				"us-east": drained, "eu-west": drained, "ap-south": drained}}, "")
			return err
		}, []string{allDrained}},
		{"read", func() error { _, _, err := c.GetRule(ctx, "api-global-default"); return err }, nil},
		{"undrain one DC", func() error {
			_, err := c.SetShares(ctx, "api-global-default", sharepolicy.Policy{DCs: map[string]sharepolicy.DCPolicy{
				"us-east": drained, "eu-west": drained}}, "")
			return err
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = nil
			if err := tt.call(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("warnings: got %q, want %q", got, tt.want)
			}
		})
	}

	// A client without WithWarnings drops them.
	got = nil
	if _, err := base.SetShares(ctx, "api-global-default", sharepolicy.Policy{DCs: map[string]sharepolicy.DCPolicy{
		"us-east": drained, "eu-west": drained, "ap-south": drained}}, ""); err != nil {
		t.Fatal(err)
	}
	if got != nil {
		t.Errorf("without WithWarnings: got %q, want nothing reported", got)
	}
}
