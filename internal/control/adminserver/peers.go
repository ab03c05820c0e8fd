package adminserver

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/pkg/logthrottle"
)

// ErrPeerURL is the error ParsePeerURLs returns, wrapped with the URL and
// the reason, for a URL that is not a coordinator's admin base URL.
var ErrPeerURL = errors.New("adminserver: invalid peer URL")

// PeerWarnInterval is how often, at most, the refusal to forward to one
// leader URL outside a PeerURLs is logged.
const PeerWarnInterval = time.Minute

// maxWarned bounds how many refused URLs a PeerURLs remembers for the
// rate limit of its warnings (whoever writes the election key may write
// many); past it, the URLs it cannot remember share one rate limit.
const maxWarned = 1024

// PeerURLs is the allow-list of the coordinators' admin base URLs
// (scheme://host[:port], as each coordinator's advertise URL): the only
// leader URLs a standby forwards requests to, with the operator's
// Authorization header. The leader's URL is read from its election key in
// etcd; without such a list, whoever can write that key collects the
// tokens of the requests that reach a standby.
//
// URLs are compared normalised: scheme and host in lower case, the
// default port (80 for http, 443 for https) made explicit, a trailing "/"
// ignored. The scheme counts: http://h does not match https://h.
//
// A nil *PeerURLs allows every URL (see Allows). A PeerURLs is safe for
// concurrent use; make one with ParsePeerURLs.
type PeerURLs struct {
	allowed map[string]bool // the normalised URLs
	list    []string        // the same, in the order given, for logs
	// refusals rate-limits the warnings of refused URLs, by URL.
	refusals *logthrottle.Keyed
}

// ParsePeerURLs returns the allow-list of urls, each an absolute http or
// https URL with a host and no user, path (beyond "/"), query or
// fragment. It returns an error wrapping ErrPeerURL that names the first
// URL that is not, and one when urls is empty.
func ParsePeerURLs(urls []string) (*PeerURLs, error) {
	if len(urls) == 0 {
		return nil, fmt.Errorf("%w: the list is empty", ErrPeerURL)
	}
	p := &PeerURLs{allowed: make(map[string]bool, len(urls)), refusals: logthrottle.NewKeyed(PeerWarnInterval, maxWarned, nil)}
	for _, raw := range urls {
		n, err := normalisePeerURL(raw)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %s", ErrPeerURL, raw, err)
		}
		if !p.allowed[n] {
			p.allowed[n] = true
			p.list = append(p.list, n)
		}
	}
	return p, nil
}

// Allows reports whether u, a leader's advertised admin URL, is in p. A
// nil p allows every u; a u that is not a valid base URL is never in p.
func (p *PeerURLs) Allows(u string) bool {
	if p == nil {
		return true
	}
	n, err := normalisePeerURL(u)
	return err == nil && p.allowed[n]
}

// String returns the normalised URLs, comma-separated; "" for a nil p.
func (p *PeerURLs) String() string {
	if p == nil {
		return ""
	}
	return strings.Join(p.list, ",")
}

// normalisePeerURL returns raw as scheme://host:port, lower case, or why
// raw is not an admin base URL.
func normalisePeerURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.Unwrap(err) // url.Error repeats raw, which the caller names
	}
	scheme := strings.ToLower(u.Scheme)
	var port string
	switch {
	case scheme != "http" && scheme != "https":
		return "", errors.New("not an absolute http(s) URL")
	case u.Opaque != "" || u.Hostname() == "":
		return "", errors.New("no host")
	case u.User != nil:
		return "", errors.New("user information is not allowed")
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", errors.New("a path, query or fragment is not allowed: want scheme://host[:port]")
	case u.Port() == "" && scheme == "http":
		port = "80"
	case u.Port() == "":
		port = "443"
	default:
		n, err := strconv.Atoi(u.Port())
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("port %s out of range", u.Port())
		}
		port = strconv.Itoa(n) // "080" is 80
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port), nil
}
