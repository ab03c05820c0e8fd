package limiterd

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/weirhq/weir/pkg/httplimit"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/logthrottle"
)

// upstreamURL parses the proxy's upstream: an absolute http or https URL.
func upstreamURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("proxy upstream %q: %w", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("proxy upstream %q: want an http:// or https:// URL with a host", s)
	}
	return u, nil
}

// upstreamLogEvery is the least time between two log lines of requests
// the upstream failed.
const upstreamLogEvery = 10 * time.Second

// newProxy returns the reverse-proxy server and its listener: requests
// are checked against lim and, when allowed, passed to the upstream with
// X-Forwarded-For, -Host and -Proto set. An upstream that cannot be
// reached is answered 502 with a JSON body.
func newProxy(cfg Proxy, lim *limiter.Limiter, log *slog.Logger, tlsCfg *tls.Config) (*http.Server, net.Listener, error) {
	up, err := upstreamURL(cfg.Upstream)
	if err != nil {
		return nil, nil, fmt.Errorf("limiterd: %w", err)
	}
	mw, err := httplimit.New(httplimit.Config{
		Checker: lim, Domain: cfg.Domain, Headers: cfg.Headers,
		TrustedProxies: cfg.TrustedProxies, OnError: cfg.OnError, Logger: log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("limiterd: %w", err)
	}
	// An upstream that is down fails every request: a line per
	// upstreamLogEvery, not per request.
	failures := logthrottle.New(upstreamLogEvery, nil)
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			// Keep the hops before ours, then add the client's.
			r.Out.Header["X-Forwarded-For"] = r.In.Header["X-Forwarded-For"]
			r.SetURL(up)
			r.SetXForwarded()
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				if held, ok := failures.Allow(); ok {
					log.Warn("proxy: upstream failed", "upstream", cfg.Upstream, "err", err, logthrottle.Held(held))
				}
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "BAD_GATEWAY", "message": "the upstream could not be reached"})
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("limiterd: listen proxy: %w", err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	// No write timeout: upstream responses may stream for long.
	srv := &http.Server{Handler: mw.Wrap(rp), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	return srv, ln, nil
}
