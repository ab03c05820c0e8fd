package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testkit/limitertest"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// TestBatchNotEncodable: a batch that gRPC cannot encode (a string that
// is not UTF-8, which protoItems keeps out of batches; here put in past
// it) is never sent, and its callers are told to send alone rather than
// all failing.
func TestBatchNotEncodable(t *testing.T) {
	addr := limitertest.Serve(t, limitertest.New(t, "domain: web\nrules:\n  - rule_id: per-user\n    key_type: user_id\n    limit: 2\n    window_seconds: 60\n", nil))
	c, err := New(Config{Addrs: []string{addr}, Linger: 50 * time.Millisecond, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const callers = 5
	errs := make([]error, callers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			v := fmt.Sprint("good-", i)
			if i == 0 {
				v = "bad-\xff"
			}
			_, errs[i] = c.batch.check(ctx, "", []*weirv1.CheckItem{{Attributes: map[string]string{"user_id": v}}})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, errAlone) {
			t.Errorf("caller %d: got %v, want errAlone", i, err)
		}
	}
}
