package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/platform/auth"
	"github.com/weirhq/weir/pkg/adminclient"
)

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// CookieName names the session cookie over plain HTTP; SecureCookieName
// over TLS (Config.Secure), where the __Host- prefix has browsers refuse
// it unless it is Secure, set by this host itself (no Domain) and scoped
// to Path=/ — the prefix requires that path.
const (
	CookieName       = "weir_console"
	SecureCookieName = "__Host-weir_console"
)

// DefaultRefresh is how often the pages refresh when the admin API does
// not say what the planning interval is.
const DefaultRefresh = time.Second

//go:embed assets
var assets embed.FS

// Config configures a Console.
type Config struct {
	// API is the admin API, authenticating bearer tokens (the handler the
	// admin port serves /rate-limits, /audit, /overview, /cluster and
	// /v1/ with). The console calls it in-process. Required.
	API http.Handler
	// Tokens checks the tokens operators sign in with: the admin API's.
	// Required.
	Tokens auth.Store
	// Secure marks the session cookie Secure and names it
	// SecureCookieName: set it when the admin port serves TLS.
	Secure bool
	// SessionIdle ends a session unused for this long; default
	// DefaultSessionIdle (1 h).
	SessionIdle time.Duration
	// SessionLifetime ends a session this long after its sign-in;
	// default DefaultSessionLifetime (12 h).
	SessionLifetime time.Duration
	// MaxSessions bounds the sessions held at once; at the bound a
	// sign-in ends the least recently used one. Default
	// DefaultMaxSessions (10,000).
	MaxSessions int
	// DefaultDomain is the domain whose rules are listed even when none of
	// them is global; default "default".
	DefaultDomain string
	// EtcdPrefix is the prefix of the etcd keys (etcdlayout.Layout), with
	// which the console names the key of a rule the admin API cannot
	// address; default etcdlayout.DefaultPrefix.
	EtcdPrefix string
	// PageTimeout bounds the admin API calls of one page; default 10 s.
	// A page whose calls do not all finish in time is shown with what was
	// read and a banner saying what is missing.
	PageTimeout time.Duration
	// PeerAllowed reports whether the console may link to a
	// coordinator's admin URL read from etcd (the leader a standby names,
	// the coordinators of the Cluster page): the coordinator passes its
	// --peer-urls (adminserver.PeerURLs.Allows), so that whoever can write
	// etcd cannot have the console send operators to a page of their own.
	// A URL it refuses is not linked, and the page says it is not among
	// --peer-urls. Default nil: every URL is linked.
	PeerAllowed func(adminURL string) bool
	// Logger receives the causes of failed pages; default: discard.
	Logger *slog.Logger
	// Now is the clock of the charts' time axis and of the sessions'
	// expiry; default time.Now.
	Now func() time.Time
}

func (c Config) layout() etcdlayout.Layout { return etcdlayout.Layout{Prefix: c.EtcdPrefix} }

// Validate reports whether c is usable.
func (c Config) Validate() error {
	var errs []error
	if c.API == nil {
		errs = append(errs, errors.New("the admin API (API) is required"))
	}
	if c.Tokens == nil {
		errs = append(errs, errors.New("a token store (Tokens) is required"))
	}
	if c.SessionIdle < 0 || c.SessionLifetime < 0 || c.MaxSessions < 0 {
		errs = append(errs, errors.New("SessionIdle, SessionLifetime and MaxSessions must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("console: invalid config: %w", err)
	}
	return nil
}

// Console serves the pages; an http.Handler for the paths under Prefix.
// It keeps no state between requests but its CSRF key and the sessions
// (in memory: a new Console has none), and is safe for concurrent use.
type Console struct {
	cfg      Config
	log      *slog.Logger
	key      []byte // the CSRF key
	sessions *sessions
	tmpl     *template.Template
	mux      *http.ServeMux
	// linked reports whether a leader's admin URL may be named and linked
	// (Config.PeerAllowed; every URL without it).
	linked func(adminURL string) bool
}

var _ http.Handler = (*Console)(nil)

// New returns a Console for cfg.
func New(cfg Config) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DefaultDomain == "" {
		cfg.DefaultDomain = "default"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PageTimeout <= 0 {
		cfg.PageTimeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionIdle == 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	if cfg.SessionLifetime == 0 {
		cfg.SessionLifetime = DefaultSessionLifetime
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("console: CSRF key: %w", err)
	}
	linked := func(adminURL string) bool { return cfg.PeerAllowed == nil || cfg.PeerAllowed(adminURL) }
	tmpl, err := template.New("").Funcs(funcs).Funcs(template.FuncMap{"peerLinked": linked}).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	c := &Console{cfg: cfg, log: cfg.Logger, key: key, tmpl: tmpl, mux: http.NewServeMux(), linked: linked,
		sessions: newSessions(cfg.Now, cfg.SessionIdle, cfg.SessionLifetime, cfg.MaxSessions)}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, fmt.Errorf("console: assets: %w", err)
	}
	files := http.StripPrefix(Prefix+"static/", http.FileServerFS(static))
	c.mux.Handle("GET "+Prefix+"static/{file}", files)
	c.mux.HandleFunc("GET "+Prefix+"signin", c.signInPage)
	c.mux.HandleFunc("POST "+Prefix+"signin", c.signIn)
	c.mux.HandleFunc("POST "+Prefix+"signout", c.session(c.signOut))
	c.mux.HandleFunc("GET "+Prefix+"{$}", c.session(c.overview))
	c.mux.HandleFunc("GET "+Prefix+"rules/{domain}/{rule}", c.session(c.rulePage))
	c.mux.HandleFunc("GET "+Prefix+"rules/{domain}/{rule}/shares", c.session(c.sharesPage))
	c.mux.HandleFunc("POST "+Prefix+"rules/{domain}/{rule}/shares", c.session(c.postShares))
	c.mux.HandleFunc("GET "+Prefix+"cluster", c.session(c.cluster))
	return c, nil
}

// ServeHTTP serves the console.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // not no-referrer: with it, forms are sent with Origin: null
	if r.Method == http.MethodPost && !sameOrigin(r) {
		http.Error(w, "cross-site request refused", http.StatusForbidden)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// sameOrigin reports whether a request's Origin, if it has one, is the
// console's own host.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true // SameSite=Strict keeps the cookie off cross-site requests
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// RefreshHeader marks the requests with which console.js refreshes a
// page: they render the page without taking the session's kept warnings,
// which are for the page the operator goes to next (another tab's
// refresh must not swallow them).
const RefreshHeader = "Weir-Console-Refresh"

// sess is a signed-in request.
type sess struct {
	id      string // the session id, the cookie's value
	token   string
	who     auth.Principal
	csrf    string
	refresh bool // a refresh by console.js (RefreshHeader)
}

// session runs h for a signed-in operator; others are sent to sign in. A
// session whose token is no longer in the token file ends here.
func (c *Console) session(h func(w http.ResponseWriter, r *http.Request, s sess)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(c.cookieName())
		var token string
		var p auth.Principal
		ok := err == nil && ck.Value != ""
		if ok {
			token, ok = c.sessions.use(ck.Value)
		}
		if ok {
			if p, ok = c.cfg.Tokens.Lookup(token); !ok {
				c.sessions.end(ck.Value) // the token was revoked
			}
		}
		if !ok {
			if r.Method != http.MethodGet {
				http.Error(w, "sign in first", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, Prefix+"signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		s := sess{id: ck.Value, token: token, who: p, csrf: c.csrfToken(ck.Value), refresh: r.Header.Get(RefreshHeader) != ""}
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil {
				http.Error(w, "bad form", http.StatusBadRequest)
				return
			}
			if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.csrf)) != 1 {
				http.Error(w, "the form is stale or forged (CSRF token mismatch); reload the page and try again", http.StatusForbidden)
				return
			}
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r, s)
	}
}

// csrfToken is the session's CSRF token: an HMAC of the session id.
func (c *Console) csrfToken(id string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil))
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, "signin", page{Title: "Sign in", Next: safeNext(r.URL.Query().Get("next"))})
}

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	next := safeNext(r.PostForm.Get("next"))
	if _, ok := c.cfg.Tokens.Lookup(token); !ok || token == "" {
		c.render(w, http.StatusUnauthorized, "signin", page{Title: "Sign in", Next: next, Error: "That token is not one of the admin API's."})
		return
	}
	id, err := c.sessions.start(token)
	if err != nil {
		c.log.Error("console: sign-in failed", "err", err)
		http.Error(w, "sign-in failed", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, c.cookie(id, 0))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request, s sess) {
	c.sessions.end(s.id)
	http.SetCookie(w, c.cookie("", -1))
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
}

// cookieName is the session cookie's name: with the __Host- prefix over
// TLS.
func (c *Console) cookieName() string {
	if c.cfg.Secure {
		return SecureCookieName
	}
	return CookieName
}

// cookie is the session cookie holding id (a session id, never a token).
// It lasts as long as the browser runs (maxAge 0) or, with maxAge -1, is
// dropped. Over TLS its path is / (required by the __Host- prefix); else
// it is sent to the console's paths only.
func (c *Console) cookie(id string, maxAge int) *http.Cookie {
	path := Prefix
	if c.cfg.Secure {
		path = "/"
	}
	return &http.Cookie{Name: c.cookieName(), Value: id, Path: path, MaxAge: maxAge, HttpOnly: true, Secure: c.cfg.Secure, SameSite: http.SameSiteStrictMode}
}

// safeNext keeps a redirect target inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return Prefix
	}
	return next
}

// client returns an admin API client for the session's token in domain,
// calling the API in-process.
func (c *Console) client(s sess, domain string) *adminclient.Client {
	hc := &http.Client{Transport: inProcess{c.cfg.API}}
	cl, err := adminclient.New("http://console.invalid/", s.token, hc)
	if err != nil {
		panic(err) // a constant, valid URL
	}
	if domain != "" {
		cl = cl.WithDomain(domain)
	}
	return cl
}

// writeClient is the client of a form's write: it collects the admin API's
// warnings (adminapi.HeaderWarning) of the answers into *warns, for
// redirectAfterWrite, or for the page that shows a failed write at once.
// Every form that writes through the API uses it.
func (c *Console) writeClient(s sess, domain string, warns *[]string) *adminclient.Client {
	return c.client(s, domain).WithWarnings(func(w string) { *warns = append(*warns, w) })
}

// redirectAfterWrite ends a form's accepted write with a redirect to
// target (redirect-after-post), keeping the write's warnings in the
// session for the page the redirect renders. They stay on the server:
// the target's query string cannot carry them, so that no link can make
// the console show a warning the API did not give.
func (c *Console) redirectAfterWrite(w http.ResponseWriter, r *http.Request, s sess, target string, warns []string) {
	c.sessions.addNotices(s.id, warns)
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// inProcess is a RoundTripper that serves requests with a handler.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// getJSON fetches a path of the API that adminclient has no method for.
func (c *Console) getJSON(ctx context.Context, s sess, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://console.invalid"+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	return inProcess{c.cfg.API}.RoundTrip(req)
}
