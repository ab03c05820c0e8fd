package adminclient_test

import (
	"context"
	"errors"
	"testing"

	"github.com/weirhq/weir/internal/testkit/adminclienttest"
	"github.com/weirhq/weir/pkg/adminclient"
)

func TestConsoleEndpoints(t *testing.T) {
	ctx := context.Background()
	srv := adminclienttest.New(t, nil, "eu", "us")
	srv.AddRule(t, "shop", loginDoc)
	srv.SetSeries("shop", "login", `{"domain": "shop", "rule_id": "login", "limit": 100, "window_seconds": 60, "interval_seconds": 1,
		"dcs": [{"dc": "eu", "points": [{"at": "2026-01-02T03:04:05Z", "demand": 0.5, "target": 0.4, "share": 0.45, "offered": 9, "admitted": 8, "rejected": 1}]}]}`)
	srv.SetOverview(`{"interval_seconds": 1, "rules": [{"domain": "shop", "rule_id": "login", "limit": 100, "window_seconds": 60,
		"dcs": [{"dc": "eu", "demand": 0.5, "target": 0.4, "share": 0.45, "last": {"offered": 9, "admitted": 8, "rejected": 1}, "recent": {"offered": 90, "admitted": 80, "rejected": 10}}]}]}`)
	srv.SetCluster(`{"coordinators": [{"name": "c1", "admin_url": "http://c1", "leader": true}, {"name": "c2", "leader": false}], "epoch": 4, "interval_seconds": 1,
		"dcs": [{"dc": "eu", "written_revision": 12, "lagging": true, "silent": false, "instances": [{"instance": "eu-1", "applied_revision": 11, "lagging": true, "silent": false}]}]}`)
	c := newClient(t, srv, adminclienttest.ReadOnlyToken).WithDomain("shop")

	ser, err := c.Series(ctx, "login")
	if err != nil {
		t.Fatal(err)
	}
	if len(ser.DCs) != 1 || len(ser.DCs[0].Points) != 1 || ser.DCs[0].Points[0].Admitted != 8 || ser.DCs[0].Points[0].Share != 0.45 || ser.DCs[0].Points[0].At.IsZero() {
		t.Errorf("Series: got %+v", ser)
	}
	if _, err := c.Series(ctx, "nope"); !errors.Is(err, adminclient.ErrNotFound) {
		t.Errorf("Series of an unknown rule: got %v, want ErrNotFound", err)
	}
	ov, err := c.Overview(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ov.Rules) != 1 || ov.Rules[0].DCs[0].Recent.Rejected != 10 || ov.Rules[0].DCs[0].Last.Admitted != 8 {
		t.Errorf("Overview: got %+v", ov)
	}
	cl, err := c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.Coordinators) != 2 || !cl.Coordinators[0].Leader || cl.Epoch != 4 || !cl.DCs[0].Instances[0].Lagging || cl.DCs[0].WrittenRevision != 12 {
		t.Errorf("Cluster: got %+v", cl)
	}

	srv.SetLeader(false, "http://leader.example:8070")
	_, err = c.Overview(ctx)
	var ae *adminclient.APIError
	if !errors.Is(err, adminclient.ErrUnavailable) || !errors.As(err, &ae) || ae.Leader != "http://leader.example:8070" {
		t.Errorf("Overview from a follower: got %v, want ErrUnavailable naming the leader", err)
	}
}
