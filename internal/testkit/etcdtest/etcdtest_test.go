package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func TestStartPutGetRestart(t *testing.T) {
	start := time.Now()
	c := Start(t)
	t.Logf("embedded etcd started in %v", time.Since(start))
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/k", "v"); err != nil {
		t.Fatal(err)
	}
	c.Restart()
	resp, err := cli.Get(ctx, "/k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("after restart got %v, want /k=v", resp.Kvs)
	}
}

// TestClusterSurvivesLeaderLoss writes through a three-member cluster,
// kills the leader, writes again through the two left, and restarts the
// stopped member, which catches up.
func TestClusterSurvivesLeaderLoss(t *testing.T) {
	start := time.Now()
	c := StartCluster(t, 3)
	t.Logf("three-member cluster started in %v", time.Since(start))
	if got := len(c.Endpoints()); got != 3 {
		t.Fatalf("got %d endpoints, want 3", got)
	}
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/k", "1"); err != nil {
		t.Fatal(err)
	}
	old := c.Leader()
	if old < 0 {
		t.Fatal("no member leads")
	}
	c.KillMember(old)
	start = time.Now()
	// A write in flight when the leader dies may time out; the two members
	// left elect a leader within a few election timeouts.
	for {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := cli.Put(pctx, "/k", "2")
		pcancel()
		if err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("put 10s after the leader member was killed: %v", err)
		}
	}
	t.Logf("a write went through %v after the leader member was killed", time.Since(start))
	if l := c.Leader(); l == old || l < 0 {
		t.Fatalf("leader is member %d, want one of the two left (not %d)", l, old)
	}
	c.RestartMember(old)
	mc := clientv3.NewKV(c.memberClient(t, old))
	resp, err := mc.Get(ctx, "/k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "2" {
		t.Fatalf("restarted member read %v, want /k=2", resp.Kvs)
	}
}

func (c *Cluster) memberClient(t *testing.T, i int) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.members[i].endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
