package slurm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// maxBody caps what we read of a response; /openapi/v3 is the largest
// of those (a few MiB on 24.11).
const maxBody = 8 << 20

// maxListBody caps a node list: v0.0.42 sends about 2.5 KB per node
// (recorded), so 128 MiB is some 50,000 nodes.
const maxListBody = 128 << 20

// listTimeout bounds one node-list request when the caller's context has
// no earlier deadline. A list is the one answer that grows with the
// cluster (about 2.5 MB for 1,000 nodes, some 0.1 s of slurmrestd CPU on
// 26.05.5), and in a storm every failing node asks for it at once: cut
// off at the per-call timeout and retried, each list would be made twice
// by a slurmrestd already behind, which is how a 200-node storm on 2 CPUs
// turned into timeouts for over half the runs. So a list gets the caller's
// whole budget, once. A hung slurmrestd is still found by the per-call
// timeout: every list follows a single-node read that has it.
const listTimeout = 60 * time.Second

// REST drives a node through slurmrestd. Discovery and the token file are
// read on first use, so constructing one costs nothing.
type REST struct {
	ep        endpoint
	user      string
	tokenFile string
	timeout   time.Duration
	retries   int
	backoff   backoff
	calls     *Counter
	cache     versionCache
	log       logrus.FieldLogger

	mu       sync.Mutex
	token    string
	versions *apiVersions // set by the first successful discovery
	cached   bool         // versions came from the cache, not from slurmrestd
}

// NewREST prepares a client for cfgURL. It does no I/O.
func NewREST(cfgURL, user, tokenFile string, timeout time.Duration, retries int, opts ...Option) (*REST, error) {
	o := buildOptions(opts)
	ep, err := newEndpoint(cfgURL)
	if err != nil {
		return nil, err
	}
	if o.httpClient != nil {
		ep.client = o.httpClient
	}
	if user == "" {
		return nil, errors.New("slurm user (X-SLURM-USER-NAME) is empty")
	}
	if retries < 0 {
		retries = 0
	}
	return &REST{
		ep: ep, user: user, tokenFile: tokenFile, timeout: timeout,
		retries: retries, backoff: o.backoff, calls: o.counter,
		cache: o.versions, log: o.log,
	}, nil
}

// Backend names the API version once discovered: the write version, or
// the read version where slurmrestd cannot change nodes.
func (r *REST) Backend() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.versions == nil:
		return "rest"
	case r.versions.write != "":
		return "rest " + r.versions.write
	}
	return "rest " + r.versions.read + " (read-only)"
}

// Calls is how many HTTP requests this client has sent.
func (r *REST) Calls() int { return r.calls.Load() }

// request is one logical call; do retries it.
type request struct {
	method, path string
	body         []byte
	// limit caps the answer's size; 0 means maxBody.
	limit int
	// list marks a node list (see listTimeout): one try up to the
	// caller's deadline instead of the per-call timeout and retries.
	list bool
}

// response is a 2xx answer.
type response struct {
	status int
	body   []byte
}

// do sends req, retrying connection errors and 5xx with backoff, and
// returns the 2xx answer.
func (r *REST) do(ctx context.Context, req request) (response, error) {
	tok, err := r.loadToken()
	if err != nil {
		return response{}, err
	}
	for attempt := 0; ; attempt++ {
		resp, err := r.once(ctx, req, tok)
		if err == nil || !retryable(ctx, err) || attempt >= r.retries || (req.list && errors.Is(err, context.DeadlineExceeded)) {
			return resp, r.explain(err)
		}
		if werr := r.backoff.wait(ctx, attempt); werr != nil {
			return response{}, fmt.Errorf("%w (gave up after %d tries: %w)", err, attempt+1, werr)
		}
	}
}

// explain adds where the refused credentials came from (never the token).
func (r *REST) explain(err error) error {
	if err == nil || !errors.Is(err, ErrUnauthorized) {
		return err
	}
	return fmt.Errorf("%w (token from %s for user %s refused; renew it with `scontrol token username=%s`)",
		err, r.tokenFile, r.user, r.user)
}

// once sends one HTTP request under the per-request timeout.
func (r *REST) once(ctx context.Context, req request, tok string) (response, error) {
	timeout := r.timeout
	if req.list && timeout > 0 {
		timeout = max(timeout, listTimeout)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	hreq, err := r.newRequest(ctx, req, tok)
	if err != nil {
		return response{}, err
	}
	r.calls.Add(1)
	resp, err := r.ep.client.Do(hreq)
	if err != nil {
		return response{}, &netError{method: req.method, url: r.ep.base + req.path, err: unwrapURL(err)}
	}
	defer resp.Body.Close()
	body, err := readCapped(resp.Body, req.limit)
	if err != nil {
		return response{}, &netError{method: req.method, url: r.ep.base + req.path, err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return response{}, apiError(req, resp.StatusCode, body)
	}
	return response{status: resp.StatusCode, body: body}, nil
}

func (r *REST) newRequest(ctx context.Context, req request, tok string) (*http.Request, error) {
	var rd io.Reader
	if req.body != nil {
		rd = bytes.NewReader(req.body)
	}
	hreq, err := http.NewRequestWithContext(ctx, req.method, r.ep.base+req.path, rd)
	if err != nil {
		return nil, fmt.Errorf("slurmrestd %s %s: %w", req.method, req.path, err)
	}
	hreq.Header.Set("Accept", "application/json")
	if req.body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	// 22.05 needs both headers; 23.02+ accepts them too
	// (docs/architecture.md#slurmrestd).
	hreq.Header.Set("X-SLURM-USER-NAME", r.user)
	hreq.Header.Set("X-SLURM-USER-TOKEN", tok)
	return hreq, nil
}

// loadToken reads the token file once per client.
func (r *REST) loadToken() (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.token != "" {
		return r.token, nil
	}
	tok, err := readToken(r.tokenFile)
	if err != nil {
		return "", &ConfigError{Err: err}
	}
	r.token = tok
	return tok, nil
}

func readCapped(rd io.Reader, limit int) ([]byte, error) {
	if limit <= 0 {
		limit = maxBody
	}
	body, err := io.ReadAll(io.LimitReader(rd, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(body) > limit {
		return nil, fmt.Errorf("%w: over %d bytes", errTooLarge, limit)
	}
	return body, nil
}

var errTooLarge = errors.New("response body too large")

// apiError builds the error for a non-2xx answer, keeping slurmrestd's
// own explanation when it sent one.
func apiError(req request, status int, body []byte) *APIError {
	e := &APIError{Method: req.method, Path: req.path, Status: status}
	var env restResponse
	if json.Unmarshal(body, &env) == nil && len(env.Errors) > 0 {
		e.Errors = env.Errors
		return e
	}
	e.Body = snippet(body)
	if e.Body == "" {
		e.Body = http.StatusText(status)
	}
	return e
}

// snippet is a short printable excerpt of a body for an error message.
func snippet(b []byte) string {
	const max = 200
	b = bytes.TrimSpace(b)
	cut := len(b) > max
	if cut {
		b = b[:max]
	}
	s := string(bytes.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, b))
	if cut {
		s += "…"
	}
	return s
}

// netError is a request that got no HTTP answer.
type netError struct {
	method, url string
	err         error
}

func (e *netError) Error() string {
	return fmt.Sprintf("slurmrestd %s %s: %v", e.method, e.url, e.err)
}

// unwrapURL drops *url.Error's own "Get \"url\":" prefix; netError says it.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (e *netError) Unwrap() error { return e.err }

// retryable: connection errors and 5xx may pass on a retry; 4xx will not,
// nor anything once the caller's context has ended.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, errTooLarge) {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Temporary()
	}
	var ne *netError
	return errors.As(err, &ne)
}
