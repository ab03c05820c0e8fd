package etcdclient_test

import (
	"testing"

	"github.com/weirhq/weir/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
