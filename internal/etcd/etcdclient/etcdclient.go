package etcdclient

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/internal/platform/tlsconf"
)

// DefaultDialTimeout is Config.DialTimeout's default.
const DefaultDialTimeout = 5 * time.Second

// Auth is how a client checks etcd and proves itself to it. The zero
// value is plain connections without a user: the system's roots for
// https:// endpoints, no client certificate, no authentication.
type Auth struct {
	// TLS names the CA that signs etcd's server certificates (default: the
	// system's roots) and, for an etcd that requires client certificates
	// (--client-cert-auth), the client's certificate and key, given
	// together. With auth enabled in etcd and no User, etcd takes the
	// certificate's common name as the user.
	TLS tlsconf.ClientFiles
	// User is the etcd user to authenticate as, with the password held in
	// PasswordFile (its one line; a final newline is ignored). Both or
	// neither. The password is never a flag value, which would show in
	// the process list. With a user the client authenticates when it is
	// built, if etcd answers within the dial timeout (a wrong password is
	// then an error at once); else on the first request etcd answers.
	User, PasswordFile string
}

// Config configures a client.
type Config struct {
	// Endpoints are etcd's client URLs, http:// or https://; with TLS
	// files given, every one must be https://. Required.
	Endpoints []string
	// Auth is how the client checks etcd and proves itself.
	Auth Auth
	// DialTimeout bounds the connection (and authentication) at New.
	// Default DefaultDialTimeout.
	DialTimeout time.Duration
	// Logger, if set, hears New say that etcd did not answer its login
	// and that the client will log in on its first request etcd answers.
	Logger *slog.Logger
}

// Validate reports what is missing or inconsistent in cfg without reading
// any file.
func (c Config) Validate() error {
	if len(c.Endpoints) == 0 {
		return errors.New("etcdclient: no endpoint (--etcd)")
	}
	tlsFiles := c.Auth.TLS.CA != "" || c.Auth.TLS.Cert != "" || c.Auth.TLS.Key != ""
	for _, ep := range c.Endpoints {
		if tlsFiles && strings.HasPrefix(ep, "http://") {
			return fmt.Errorf("etcdclient: endpoint %s is plain HTTP, but TLS files are given (--etcd-ca, --etcd-cert, --etcd-key): use https://", ep)
		}
	}
	if (c.Auth.TLS.Cert == "") != (c.Auth.TLS.Key == "") {
		return errors.New("etcdclient: a client certificate needs both --etcd-cert and --etcd-key")
	}
	if (c.Auth.User == "") != (c.Auth.PasswordFile == "") {
		return errors.New("etcdclient: a user needs both --etcd-user and --etcd-password-file")
	}
	return nil
}

// ClientConfig returns the clientv3 configuration: it validates cfg, and
// reads the TLS files and the password file, reporting one that cannot be
// read or holds nothing usable (a CA file without a certificate, an empty
// password).
func (c Config) ClientConfig() (clientv3.Config, error) {
	if err := c.Validate(); err != nil {
		return clientv3.Config{}, err
	}
	out := clientv3.Config{Endpoints: c.Endpoints, DialTimeout: c.DialTimeout, Logger: zap.NewNop()}
	if out.DialTimeout <= 0 {
		out.DialTimeout = DefaultDialTimeout
	}
	tc, err := c.Auth.TLS.Client()
	if err != nil {
		return clientv3.Config{}, fmt.Errorf("etcdclient: TLS: %w", err)
	}
	if tc == nil && hasHTTPS(c.Endpoints) {
		tc = &tls.Config{MinVersion: tls.VersionTLS12} // the system's roots
	}
	out.TLS = tc
	if c.Auth.User != "" {
		b, err := os.ReadFile(c.Auth.PasswordFile)
		if err != nil {
			return clientv3.Config{}, fmt.Errorf("etcdclient: password: %w", err)
		}
		pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if pw == "" {
			return clientv3.Config{}, fmt.Errorf("etcdclient: password file %s is empty", c.Auth.PasswordFile)
		}
		out.Username, out.Password = c.Auth.User, pw
	}
	return out, nil
}

// New builds a client as cfg says. With TLS it first connects to each
// https:// endpoint it can reach and fails, naming the endpoint, when one
// refuses the TLS connection (its certificate not signed by the CA, the
// client's certificate missing or not trusted): the etcd client itself
// would only retry until its requests time out. An endpoint it cannot
// reach is no error, nor is an unreachable etcd: its requests wait or fail
// until etcd answers, so that a limiter restarted while etcd is down
// starts (from --state-dir). With a user it authenticates first, and
// fails when etcd refuses the user or password; when etcd does not answer
// within the dial timeout, it returns a client that logs in on its first
// request etcd answers (loginLater).
func New(cfg Config) (*clientv3.Client, error) {
	cc, err := cfg.ClientConfig()
	if err != nil {
		return nil, err
	}
	if cc.TLS != nil {
		ctx, cancel := context.WithTimeout(context.Background(), cc.DialTimeout)
		err := checkTLS(ctx, cfg.Endpoints, cc.TLS)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	cli, err := clientv3.New(cc)
	if err != nil && cc.Username != "" && unanswered(err) {
		if cfg.Logger != nil {
			cfg.Logger.Warn("etcd did not answer the login at start; logging in on the first request it answers",
				"endpoints", strings.Join(cfg.Endpoints, ","), "user", cc.Username, "err", err)
		}
		cli, err = loginLater(cc)
	}
	if err != nil {
		return nil, fmt.Errorf("etcdclient: connect to %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	return cli, nil
}

// unanswered reports whether err, from clientv3.New with a user, says
// that etcd did not answer the login (rather than refused it).
func unanswered(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// notLoggedIn is the token a loginLater client holds until it logs in:
// any etcd with auth refuses it as invalid, which makes the client log in
// and resend the request.
const notLoggedIn = "weir-not-logged-in"

// loginLater returns a client of cc's user that logs in on its first
// request etcd answers, where clientv3.New logs in at once and fails when
// etcd does not answer. clientv3.New given a token does not log in; its
// requests carry that token, which etcd refuses as invalid, and the
// client's interceptors then log in with the user and password and resend
// the request (clientv3's shouldRefreshToken, for unary requests and
// streams alike), as they do when a token expires. Clearing the token and
// setting the user after New, before any request, is what makes them.
// The client keeps its token up to date the same way afterwards.
func loginLater(cc clientv3.Config) (*clientv3.Client, error) {
	user, password := cc.Username, cc.Password
	cc.Username, cc.Password, cc.Token = "", "", notLoggedIn
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, err
	}
	cli.Token, cli.Username, cli.Password = "", user, password
	return cli, nil
}

// checkTLS opens a TLS connection to each https:// endpoint, as the etcd
// client's gRPC does (HTTP/2), and reports the first one that refuses it.
// A refused client certificate shows only after the handshake, as an
// alert in reply to the first write; etcd answers the HTTP/2 preface with
// its settings otherwise. An endpoint not reached is passed over.
func checkTLS(ctx context.Context, endpoints []string, tc *tls.Config) error {
	tc = tc.Clone()
	tc.NextProtos = []string{"h2"}
	for _, ep := range endpoints {
		host, ok := strings.CutPrefix(ep, "https://")
		if !ok {
			continue
		}
		host, _, _ = strings.Cut(host, "/")
		raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", host)
		if err != nil {
			continue // unreachable now: the client retries
		}
		if err := handshake(ctx, raw, host, tc); err != nil {
			return fmt.Errorf("etcdclient: %s refused the TLS connection (check --etcd-ca, --etcd-cert and --etcd-key): %w", ep, err)
		}
	}
	return nil
}

// h2Preface is HTTP/2's client connection preface and an empty SETTINGS
// frame.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"

// handshake completes TLS over raw and reads the server's first reply;
// it closes raw.
func handshake(ctx context.Context, raw net.Conn, host string, tc *tls.Config) error {
	defer raw.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	if tc.ServerName == "" {
		tc.ServerName, _, _ = net.SplitHostPort(host)
	}
	conn := tls.Client(raw, tc)
	if err := conn.HandshakeContext(ctx); err != nil {
		return err
	}
	if _, err := conn.Write([]byte(h2Preface)); err != nil {
		return err
	}
	var b [1]byte
	if _, err := conn.Read(b[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil // no reply in time, but no refusal either
		}
		return err
	}
	return nil
}

func hasHTTPS(endpoints []string) bool {
	for _, ep := range endpoints {
		if strings.HasPrefix(ep, "https://") {
			return true
		}
	}
	return false
}

// AddFlags adds --etcd-ca, --etcd-cert, --etcd-key, --etcd-user and
// --etcd-password-file to fs, setting a's fields. There is no flag for the
// password itself: give it in a file, readable by the process only.
func AddFlags(fs *flag.FlagSet, a *Auth) {
	fs.StringVar(&a.TLS.CA, "etcd-ca", "", "trust etcd servers whose certificates this CA signs (PEM); endpoints must be https:// (default: the system's roots)")
	fs.StringVar(&a.TLS.Cert, "etcd-cert", "", "client certificate (PEM) to present to an etcd that requires one (--client-cert-auth); with etcd auth on and no --etcd-user, its common name is the etcd user")
	fs.StringVar(&a.TLS.Key, "etcd-key", "", "the etcd client certificate's private key (PEM)")
	fs.StringVar(&a.User, "etcd-user", "", "etcd user to authenticate as (needs --etcd-password-file)")
	fs.StringVar(&a.PasswordFile, "etcd-password-file", "", "file holding --etcd-user's password (one line)")
}
