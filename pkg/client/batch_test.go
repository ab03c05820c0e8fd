package client_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/client"
	"github.com/weirhq/weir/pkg/limiter"
)

// TestBatchOfLargeItems: items each of which the limiter takes, whose
// batch is larger than the limiter's 4 MiB request limit, are split
// rather than all failing.
func TestBatchOfLargeItems(t *testing.T) {
	addr, _ := serve(t, rulesYAML)
	c := newClient(t, client.Config{Addrs: []string{addr}, Linger: 100 * time.Millisecond, Timeout: 5 * time.Second})
	const callers = 80
	value := strings.Repeat("v", limiter.MaxValueLen)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			it := item("user_id", fmt.Sprint("large-", i))
			for j := range limiter.MaxAttributes - 1 {
				it.Attributes[fmt.Sprintf("%0*d", limiter.MaxNameLen, j)] = value
			}
			_, errs[i] = c.Check(ctx(t), limiter.Request{Items: []limiter.Item{it}})
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}
