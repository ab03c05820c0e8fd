package redisstore_test

import (
	"os"
	"testing"

	"github.com/weirhq/weir/internal/testkit/redistest"
)

// cluster is the package's Redis Cluster, started by the first test that
// needs it (a few seconds) and shared by the tests that leave its topology
// alone; tests that kill nodes start their own.
var cluster redistest.SharedCluster

func TestMain(m *testing.M) {
	code := m.Run()
	cluster.Stop()
	os.Exit(code)
}
