package slurm

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/config"
)

// testToken is what every fake token file holds; no error may contain it.
const testToken = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXRva2VuLWZvci10ZXN0cw.SIGNATURE-must-not-leak"

// fixture reads a recorded file under testdata/.
func fixture(t *testing.T, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return b
}

// restFixture reads testdata/rest/<release>/<file>.
func restFixture(t *testing.T, release, file string) []byte {
	return fixture(t, "rest", release, file)
}

// writeToken writes a token file with mode and returns its path.
func writeToken(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "slurmrestd.token")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// reply is one canned answer.
type reply struct {
	status int
	body   []byte
}

// seenRequest is what the fake server recorded of a request.
type seenRequest struct {
	method, path, user, token, body, contentType string
}

// fakeSlurmrestd serves recorded answers keyed by "METHOD /path". A key
// mapped to several replies gives them in turn, the last one repeating.
type fakeSlurmrestd struct {
	mu     sync.Mutex
	routes map[string][]reply
	seen   []seenRequest
}

func newFake() *fakeSlurmrestd { return &fakeSlurmrestd{routes: map[string][]reply{}} }

func (f *fakeSlurmrestd) on(method, path string, replies ...reply) *fakeSlurmrestd {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[method+" "+path] = replies
	return f
}

func (f *fakeSlurmrestd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, seenRequest{
		method: r.Method, path: r.URL.EscapedPath(), body: string(body),
		user: r.Header.Get("X-SLURM-USER-NAME"), token: r.Header.Get("X-SLURM-USER-TOKEN"),
		contentType: r.Header.Get("Content-Type"),
	})
	key := r.Method + " " + r.URL.EscapedPath()
	rs := f.routes[key]
	var rep reply
	switch {
	case len(rs) == 0:
		rep = reply{404, []byte("no route " + key)}
	case len(rs) == 1:
		rep = rs[0]
	default:
		rep, f.routes[key] = rs[0], rs[1:]
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	w.Write(rep.body)
}

func (f *fakeSlurmrestd) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// count is how many requests hit "METHOD /path".
func (f *fakeSlurmrestd) count(method, path string) int {
	n := 0
	for _, r := range f.requests() {
		if r.method == method && r.path == path {
			n++
		}
	}
	return n
}

// serve starts f on a TCP httptest server.
func serve(t *testing.T, f *fakeSlurmrestd) string {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL
}

// noSleep records backoff delays instead of sleeping.
type noSleep struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (s *noSleep) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
	return ctx.Err()
}

// testOpts makes retries instant and deterministic: full jitter returns
// the ceiling so the test can check the exponential growth.
func testOpts(s *noSleep) []Option {
	return []Option{
		WithSleep(s.sleep),
		WithJitter(func(d time.Duration) time.Duration { return d }),
		WithBackoff(100*time.Millisecond, 1*time.Second),
	}
}

// restConfig is a config.Slurm for REST against url with a good token file.
func restConfig(t *testing.T, backend, url string) config.Slurm {
	c := config.Default().Slurm
	c.Backend = backend
	c.URL = url
	c.TokenFile = writeToken(t, "SLURM_JWT="+testToken+"\n", 0o600)
	c.Timeout = config.Duration{Duration: 5 * time.Second}
	c.Retries = 2
	return c
}

// openapiRoute serves release's recorded discovery document.
func openapiRoute(t *testing.T, f *fakeSlurmrestd, release string) {
	f.on("GET", "/openapi/v3", reply{200, restFixture(t, release, "openapi.200.json")})
}

// serveHandler starts h on a TCP httptest server.
func serveHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func chmod(path string, mode os.FileMode) error { return os.Chmod(path, mode) }
