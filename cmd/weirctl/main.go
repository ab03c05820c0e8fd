// Command weirctl is the operator's CLI for Weir's admin API, which the
// coordinator serves: apply a rule file, list, show and delete rules, see a
// key's quota in every DC, a rule's hot keys, its live shares, and the
// audit log, and pin, bound or drain a DC's share of a global rule.
//
//	weirctl --server https://coord:8070 --token-file ~/.weir-token apply -f rules.yaml --dry-run
//	weirctl get api-per-ip -o json
//	weirctl shares pin search-per-region us-east 60%
//
// The token comes from --token-file, --token or WEIR_TOKEN and is never
// printed. Output is an aligned table, or the API's JSON with -o json.
// Warnings the server sends with an answer (the Weir-Warning header, as
// when a share policy drains every DC) go to stderr as
// "weirctl: warning: ...", so that the output stays as scripts expect.
// The exit status is 0 on success, 1 on an error (the message, and the
// API's reason for each field, on stderr) and 2 on a usage error.
package main

import (
	"context"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, env{
		args:      os.Args[1:],
		stdin:     os.Stdin,
		stdout:    os.Stdout,
		stderr:    os.Stderr,
		lookupEnv: os.LookupEnv,
	})
	stop()
	os.Exit(code)
}

// httpClient returns the HTTP client of the commands: the environment's
// transport (tests give one), with the --timeout of each request.
func (a *app) httpClient() *http.Client {
	hc := &http.Client{Timeout: a.timeout}
	if a.env.transport != nil {
		hc.Transport = a.env.transport
	}
	return hc
}
