package etcdtest

import (
	"context"
	"testing"
	"time"
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
