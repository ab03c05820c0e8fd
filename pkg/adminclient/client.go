package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/weirhq/weir/pkg/adminapi"
)

// MaxResponseBytes bounds the body of an answer the client reads. The
// largest answer is a list of rules: at most 10,000 rules of a few KiB each.
const MaxResponseBytes = 64 << 20

// Client calls one admin API. It holds no connection state of its own (the
// *http.Client does), never changes after it is made, and is safe for
// concurrent use. The zero value is not usable; call New.
type Client struct {
	base   *url.URL
	token  string
	hc     *http.Client
	domain string
	warn   func(warning string) // nil: warnings are dropped
}

// New returns a client of the admin API at baseURL, an http or https URL
// with an optional path prefix ("https://coord.example:8070",
// "http://10.0.0.1/weir"). token is sent as "Authorization: Bearer token"
// on every request, and never appears in errors; empty sends none. hc
// carries the requests and sets their timeouts and TLS; nil means
// http.DefaultClient, which has no timeout, so callers should pass a ctx
// with a deadline.
func New(baseURL, token string, hc *http.Client) (*Client, error) {
	if !strings.Contains(baseURL, "://") {
		return nil, fmt.Errorf("adminclient: server URL %q: want http:// or https://", baseURL)
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("adminclient: server URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("adminclient: server URL %q: want http:// or https://", baseURL)
	case u.Host == "":
		return nil, fmt.Errorf("adminclient: server URL %q has no host", baseURL)
	case u.User != nil:
		return nil, errors.New("adminclient: server URL carries credentials; give a token instead")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("adminclient: server URL %q: want no query or fragment", baseURL)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: u, token: token, hc: hc}, nil
}

// WithDomain returns a copy of c that names domain in every request
// (?domain=); c is unchanged. An empty domain lets the server choose (its
// only or default domain).
func (c *Client) WithDomain(domain string) *Client {
	d := *c
	d.domain = domain
	return &d
}

// WithWarnings returns a copy of c that calls warn with each warning the
// server sends (each adminapi.HeaderWarning field of an answer), such as
// that a share policy accepted leaves every DC a share of 0; c is
// unchanged. warn is called for every answer the client receives, 2xx or
// not, once per warning in the order the answer carries them, on the
// calling goroutine before the method returns (so before its result or
// error). A method that sends several requests reports the warnings of
// each. warn must be safe for concurrent use if the copy is. A nil warn,
// like a client never given one, drops warnings.
func (c *Client) WithWarnings(warn func(warning string)) *Client {
	d := *c
	d.warn = warn
	return &d
}

// Domain returns the domain c names in its requests, empty for none.
func (c *Client) Domain() string { return c.domain }

// BaseURL returns the URL of the API, as given to New.
func (c *Client) BaseURL() string { return c.base.String() }

// request is one call of the API.
type request struct {
	method  string
	path    []string // unescaped path segments after the base URL
	query   url.Values
	body    any // marshalled as JSON when not nil
	ifMatch string
}

// do sends req and decodes a 2xx answer's body into out (unless out is
// nil). Other answers give an *APIError. It reports the answer's warnings
// to c.warn, whatever its status, and returns its header.
func (c *Client) do(ctx context.Context, req request, out any) (http.Header, error) {
	u := c.url(req.path, req.query)
	var body io.Reader
	if req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, body)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Accept", "application/json")
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	if req.ifMatch != "" {
		hr.Header.Set("If-Match", quoteETag(req.ifMatch))
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return nil, err // a *url.Error naming the method and URL, never the token
	}
	defer resp.Body.Close()
	if c.warn != nil {
		for _, w := range resp.Header.Values(adminapi.HeaderWarning) {
			c.warn(w)
		}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read answer of %s %s: %w", req.method, u, err)
	}
	if len(data) > MaxResponseBytes {
		return nil, fmt.Errorf("answer of %s %s is over %d bytes", req.method, u, MaxResponseBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, apiError(resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("decode answer of %s %s: %w", req.method, u, err)
		}
	}
	return resp.Header, nil
}

// url builds the URL of the path segments under the base URL, escaping
// each segment, with the query and c's domain.
func (c *Client) url(path []string, q url.Values) string {
	u := *c.base
	raw := strings.TrimSuffix(c.base.EscapedPath(), "/")
	plain := strings.TrimSuffix(c.base.Path, "/")
	for _, s := range path {
		plain += "/" + s
		raw += "/" + escapeSegment(s)
	}
	u.Path, u.RawPath = plain, raw
	if c.domain != "" {
		if q == nil {
			q = url.Values{}
		}
		q.Set("domain", c.domain)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// escapeSegment escapes s as one path segment. "." and ".." are escaped
// too, so that no one cleans them away as relative segments.
func escapeSegment(s string) string {
	if s == "." || s == ".." {
		return strings.ReplaceAll(s, ".", "%2E")
	}
	return url.PathEscape(s)
}

// apiError reads an error answer: {"error": "...", "fields": [...]}, or,
// from something other than the API (a proxy), whatever text it sent.
func apiError(status int, data []byte) *APIError {
	var body adminapi.ErrorBody
	if json.Unmarshal(data, &body) == nil && body.Error != "" {
		return &APIError{Status: status, Message: body.Error, Fields: body.Fields, Omitted: body.Omitted, Leader: body.Leader}
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 || !isText(msg) {
		msg = ""
	}
	return &APIError{Status: status, Message: msg}
}

func isText(s string) bool {
	for _, r := range s {
		if r < ' ' && r != '\n' && r != '\t' || r == 0x7f || r == '\uFFFD' {
			return false
		}
	}
	return true
}

// quoteETag makes an entity tag of an ETag given with or without its
// quotes: 7 and "7" both give "7"; W/"7" and * stay as they are.
func quoteETag(s string) string {
	if s == "*" || strings.HasPrefix(s, `"`) || strings.HasPrefix(s, `W/"`) {
		return s
	}
	return `"` + s + `"`
}
