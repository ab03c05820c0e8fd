package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/pkg/adminclient"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

const defaultServer = "http://127.0.0.1:8070"

// env is what a run of weirctl gets from its process; tests give their own.
type env struct {
	args           []string
	stdin          io.Reader
	stdout, stderr io.Writer
	lookupEnv      func(string) (string, bool)
	// transport carries the requests; nil means http.DefaultTransport.
	transport http.RoundTripper
}

// app holds one run's environment and global flags.
type app struct {
	env env

	server    string
	token     string
	tokenFile string
	domain    string
	// domainFrom says where domain came from ("--domain" or
	// "WEIR_DOMAIN"), for messages.
	domainFrom string
	output     string
	timeout    time.Duration

	// started is set once a command's flags and arguments are parsed and
	// it begins to run: errors before that are usage errors.
	started bool
}

// usageError is an error in how weirctl was called; it exits 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// run runs weirctl with e's arguments and returns the exit status.
func run(ctx context.Context, e env) int {
	a := &app{env: e}
	root := a.rootCommand()
	root.SetArgs(e.args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(e.stderr, "weirctl:", indent(err.Error()))
	var ue usageError
	if !a.started || errors.As(err, &ue) {
		fmt.Fprintf(e.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return exitUsage
	}
	return exitError
}

// indent indents the lines after the first of a message by two spaces,
// unless they already are: the problems of a rule file, one per line,
// then read as part of the error above them.
func indent(msg string) string {
	lines := strings.Split(msg, "\n")
	for i := 1; i < len(lines); i++ {
		if lines[i] != "" && !strings.HasPrefix(lines[i], " ") {
			lines[i] = "  " + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "weirctl",
		Short: "Manage Weir's rate-limit rules and global shares through the coordinator's admin API",
		Long: `weirctl manages Weir's rate-limit rules and the shares of global rules
through the admin API the coordinator serves.

The API token comes from --token-file or --token, else from WEIR_TOKEN;
it is never printed. The server is --server, else WEIR_SERVER. The domain
is --domain, else WEIR_DOMAIN, else the server's choice: its default
domain when that holds the rule, else the only domain that does (an id
held by several other domains is refused, naming them). Prefer a file or the environment: command-line
arguments are visible to other users of the machine.

Warnings the server sends with an answer (its Weir-Warning header, as
when a share policy drains every DC) are printed to stderr as
"weirctl: warning: ...": the output on stdout is unchanged.

Exit status: 0 on success, 1 on an error, 2 on a usage error.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			a.started = true
			return a.checkFlags(cmd)
		},
	}
	f := root.PersistentFlags()
	f.StringVar(&a.server, "server", defaultServer, "admin API URL of a coordinator (env WEIR_SERVER)")
	f.StringVar(&a.token, "token", "", "API bearer token (env WEIR_TOKEN; prefer --token-file or the environment)")
	f.StringVar(&a.tokenFile, "token-file", "", "file holding the API bearer token")
	f.StringVar(&a.domain, "domain", "", "rule domain (env WEIR_DOMAIN; default: the server's default domain if it holds the rule, else the only domain that does)")
	f.StringVarP(&a.output, "output", "o", "table", "output format: table or json")
	f.DurationVar(&a.timeout, "timeout", 10*time.Second, "time limit of each request to the API")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	root.AddCommand(a.applyCommand(), a.getCommand(), a.deleteCommand(), a.statusCommand(),
		a.topCommand(), a.sharesCommand(), a.auditCommand())
	return root
}

// checkFlags validates the global flags and fills in the environment's
// defaults.
func (a *app) checkFlags(cmd *cobra.Command) error {
	if a.output != "table" && a.output != "json" {
		return usagef("--output %q: want table or json", a.output)
	}
	if a.timeout <= 0 {
		return usagef("--timeout %v: want a positive duration", a.timeout)
	}
	if !cmd.Flags().Changed("server") {
		if v, ok := a.env.lookupEnv("WEIR_SERVER"); ok && v != "" {
			a.server = v
		}
	}
	a.domainFrom = "--domain"
	if !cmd.Flags().Changed("domain") {
		a.domain, a.domainFrom = "", ""
		if v, ok := a.env.lookupEnv("WEIR_DOMAIN"); ok && v != "" {
			a.domain, a.domainFrom = v, "WEIR_DOMAIN"
		}
	}
	if a.token != "" && a.tokenFile != "" {
		return usagef("give --token or --token-file, not both")
	}
	return nil
}

// client returns a client of the API for the global flags, in --domain,
// that prints the server's warnings to stderr.
func (a *app) client() (*adminclient.Client, error) {
	token, err := a.resolveToken()
	if err != nil {
		return nil, err
	}
	c, err := adminclient.New(a.server, token, a.httpClient())
	if err != nil {
		return nil, usageError{err}
	}
	if u, _ := url.Parse(a.server); u.Scheme == "http" && !isLoopback(u.Hostname()) {
		fmt.Fprintf(a.env.stderr, "weirctl: warning: the token goes to %s over plain HTTP\n", u.Host)
	}
	return c.WithDomain(a.domain).WithWarnings(a.warn), nil
}

// warn prints a warning of the server to stderr, where it cannot disturb
// scripts that read the output.
func (a *app) warn(msg string) {
	fmt.Fprintf(a.env.stderr, "weirctl: warning: %s\n", msg)
}

// resolveToken returns the token of --token, --token-file or WEIR_TOKEN.
// Its errors never hold the token.
func (a *app) resolveToken() (string, error) {
	switch {
	case a.token != "":
		return a.token, nil
	case a.tokenFile != "":
		b, err := os.ReadFile(a.tokenFile)
		if err != nil {
			return "", fmt.Errorf("read token: %w", err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" || strings.ContainsAny(t, "\r\n") {
			return "", fmt.Errorf("token file %s: want one line holding the token", a.tokenFile)
		}
		return t, nil
	}
	if t, ok := a.env.lookupEnv("WEIR_TOKEN"); ok && strings.TrimSpace(t) != "" {
		return strings.TrimSpace(t), nil
	}
	return "", usagef("no API token: give --token-file FILE, or set WEIR_TOKEN")
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// args returns a validator of positional arguments named names, the last
// optional when optional is set.
func args(optional bool, names ...string) cobra.PositionalArgs {
	return func(_ *cobra.Command, got []string) error {
		min := len(names)
		if optional {
			min--
		}
		switch {
		case len(got) < min:
			return usagef("missing %s", strings.Join(names[len(got):min], " "))
		case len(got) > len(names):
			return usagef("unexpected argument %q", got[len(names)])
		}
		for i, g := range got {
			if g == "" {
				return usagef("%s is empty", names[i])
			}
		}
		return nil
	}
}

// json reports whether -o json was asked for.
func (a *app) json() bool { return a.output == "json" }
