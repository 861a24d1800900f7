package slurm

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// endpoint is where slurmrestd listens: a base URL for request paths and
// the client that reaches it.
type endpoint struct {
	base   string // "http://host:port" (no trailing slash); "http://localhost" for unix
	client *http.Client
}

// newEndpoint accepts http://, https:// and unix:/path/to.sock. It dials
// nothing; the request timeout comes from each request's context.
func newEndpoint(raw string) (endpoint, error) {
	if path, ok := strings.CutPrefix(raw, "unix:"); ok {
		return unixEndpoint(strings.TrimPrefix(path, "//"))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return endpoint{}, fmt.Errorf("slurm url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return endpoint{}, fmt.Errorf("slurm url %q: want http://host:port, https://host:port or unix:/path", raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return endpoint{}, fmt.Errorf("slurm url %q: credentials, query or fragment not allowed", u.Redacted())
	}
	base := u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/")
	return endpoint{base: base, client: newClient(nil)}, nil
}

func unixEndpoint(path string) (endpoint, error) {
	if !strings.HasPrefix(path, "/") {
		return endpoint{}, fmt.Errorf("slurm url unix:%s: want an absolute socket path", path)
	}
	d := &net.Dialer{}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "unix", path)
	}
	return endpoint{base: "http://localhost", client: newClient(dial)}, nil
}

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// newClient follows no redirect: Go forwards custom headers such as
// X-SLURM-USER-TOKEN to wherever a redirect points.
func newClient(dial dialFunc) *http.Client {
	return &http.Client{Transport: newTransport(dial), CheckRedirect: noRedirect}
}

// newTransport ignores proxy variables on purpose: slurmd gives us no
// environment, and an admin's shell proxy must not see the token.
func newTransport(dial dialFunc) *http.Transport {
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	return &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        2,
		IdleConnTimeout:     30 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
