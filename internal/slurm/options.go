package slurm

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// Counter counts Slurm calls: HTTP requests sent and scontrol runs. The
// health check logs it (a healthy node must make none) and the bench
// reports it. Safe for concurrent use; the zero value is ready.
type Counter struct{ n atomic.Int64 }

// Add records n calls.
func (c *Counter) Add(n int) { c.n.Add(int64(n)) }

// Load is the number of calls so far.
func (c *Counter) Load() int { return int(c.n.Load()) }

// Option tunes a controller.
type Option func(*options)

type options struct {
	log        logrus.FieldLogger
	counter    *Counter
	backoff    backoff
	httpClient *http.Client
	env        []string
	versions   versionCache
}

func buildOptions(opts []Option) options {
	o := options{backoff: defaultBackoff()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		o.log = l
	}
	if o.versions.now == nil {
		o.versions.now = time.Now
	}
	if o.counter == nil {
		o.counter = &Counter{}
	}
	return o
}

// WithLogger receives the REST→scontrol fallback notices.
func WithLogger(l logrus.FieldLogger) Option { return func(o *options) { o.log = l } }

// WithCounter shares a call counter, e.g. across several controllers.
func WithCounter(c *Counter) Option { return func(o *options) { o.counter = c } }

// WithBackoff sets the first and largest retry delay (full jitter below).
func WithBackoff(base, max time.Duration) Option {
	return func(o *options) { o.backoff.base, o.backoff.max = base, max }
}

// WithSleep replaces the wait between retries (tests record delays).
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(o *options) { o.backoff.sleep = sleep }
}

// WithJitter replaces the uniform draw in [0, d) (tests make it fixed).
func WithJitter(jitter func(d time.Duration) time.Duration) Option {
	return func(o *options) { o.backoff.jitter = jitter }
}

// WithHTTPClient replaces the HTTP client (and so the transport) used for
// slurmrestd; the URL's scheme and host still apply.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithEnv replaces the fixed environment given to scontrol.
func WithEnv(env []string) Option { return func(o *options) { o.env = env } }

// WithVersionCache keeps slurmrestd's API version in path between runs
// (see versionCacheTTL); readOnly (a dry run) uses it without writing.
func WithVersionCache(path string, readOnly bool) Option {
	return func(o *options) { o.versions.path, o.versions.readOnly = path, readOnly }
}

// withVersionClock sets the cache's clock (tests).
func withVersionClock(now func() time.Time) Option {
	return func(o *options) { o.versions.now = now }
}
