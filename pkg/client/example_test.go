package client_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/weirhq/weir/internal/testkit/limitertest"
	"github.com/weirhq/weir/pkg/client"
	"github.com/weirhq/weir/pkg/httplimit"
	"github.com/weirhq/weir/pkg/limiter"
)

// exampleLimiter starts a limiter for the examples: in a service, its
// address is the DC's limiter service, e.g. "limiter.weir.svc:9090".
func exampleLimiter(rules string) (addr string, stop func()) {
	addr, stop, err := limitertest.Run(rules, func() time.Time { return t0 })
	if err != nil {
		log.Fatal(err)
	}
	return addr, stop
}

// An HTTP service protected by a remote limiter: the middleware of
// pkg/httplimit with the client as its checker.
func Example_httpService() {
	addr, stop := exampleLimiter(`
domain: shop
rules:
  - rule_id: per-key
    key_type: api_key
    limit: 2
    window_seconds: 60
    algorithm: FixedWindow
`)
	defer stop()

	c, err := client.New(client.Config{Addrs: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	mw, err := httplimit.New(httplimit.Config{Checker: c, Headers: map[string]string{"X-Api-Key": "api_key"}})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	defer srv.Close()

	for range 3 {
		req, _ := http.NewRequest("GET", srv.URL+"/orders", nil)
		req.Header.Set("X-Api-Key", "k-123")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Printf("%d remaining=%s retry-after=%q\n", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), resp.Header.Get("Retry-After"))
	}
	// Output:
	// 200 remaining=1 retry-after=""
	// 200 remaining=0 retry-after=""
	// 429 remaining=0 retry-after="60"
}

// A batch job checks many keys in one call: the client sends them in RPCs
// of at most 256 items, and answers each key.
func Example_batchJob() {
	addr, stop := exampleLimiter(`
domain: mail
rules:
  - rule_id: one-mail-per-account
    key_type: account
    limit: 1
    window_seconds: 3600
`)
	defer stop()

	c, err := client.New(client.Config{Addrs: []string{addr}, Timeout: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var req limiter.Request
	for i := range 600 {
		req.Items = append(req.Items, limiter.Item{Attributes: map[string]string{"account": fmt.Sprint(i % 400)}})
	}
	resp, err := c.Check(context.Background(), req)
	if err != nil {
		log.Fatal(err)
	}
	sent := 0
	for _, it := range resp.Items {
		if it.Allowed {
			sent++
		}
	}
	fmt.Printf("%d of %d mails may go; %d RPCs\n", sent, len(req.Items), c.Stats().RPCs)
	// Output:
	// 400 of 600 mails may go; 3 RPCs
}

// Batching and a failure policy per call site: concurrent checks within a
// millisecond share one RPC; the payment path rejects when the limiter
// cannot answer, while the default (Config.Policy) allows.
func ExampleClient_Site() {
	addr, stop := exampleLimiter(`
domain: pay
rules:
  - rule_id: per-user
    key_type: user_id
    limit: 10
    window_seconds: 60
`)
	defer stop()

	c, err := client.New(client.Config{Addrs: []string{addr}, Linger: time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	payments, err := c.Site(client.Policy{OnFailure: client.Reject, RetryAfter: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	resp, err := payments.Check(context.Background(), limiter.Request{Items: []limiter.Item{
		{Attributes: map[string]string{"user_id": "u-1"}, Hits: 3},
	}})
	if err != nil {
		log.Fatal(err)
	}
	r := resp.Items[0].Results[resp.Items[0].Decisive]
	fmt.Println(resp.Allowed, r.Match.Rule.Spec.ID, r.Remaining)
	// Output:
	// true per-user 7
}
