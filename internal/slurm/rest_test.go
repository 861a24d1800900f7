package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func newTestREST(t *testing.T, url string, opts ...Option) *REST {
	t.Helper()
	tok := writeToken(t, testToken+"\n", 0o600)
	if opts == nil {
		opts = testOpts(&noSleep{})
	}
	r, err := NewREST(url, "slurm", tok, 5*time.Second, 2, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// recordedServer serves release's openapi document and, per route
// ("POST /slurm/{v}/node/{n}"), the recorded file for version and node.
func recordedServer(t *testing.T, release, version, node string, cases map[string]string) *fakeSlurmrestd {
	f := newFake()
	openapiRoute(t, f, release)
	for route, file := range cases {
		method, path, _ := strings.Cut(route, " ")
		path = strings.ReplaceAll(strings.ReplaceAll(path, "{v}", version), "{n}", node)
		f.on(method, path, reply{statusOf(t, file), restFixture(t, release, version+"/"+file)})
	}
	return f
}

// statusOf reads the HTTP status from a recording's name: case.STATUS.json.
func statusOf(t *testing.T, file string) int {
	parts := strings.Split(file, ".")
	var st int
	if len(parts) < 3 || json.Unmarshal([]byte(parts[len(parts)-2]), &st) != nil {
		t.Fatalf("no status in %s", file)
	}
	return st
}

func TestRESTNodeEveryVersion(t *testing.T) {
	for _, c := range recordedNodes() {
		// Discovery picks the newest version, so serve a document that
		// offers only the version under test.
		t.Run(c.release+"/"+c.version+"/"+c.file, func(t *testing.T) {
			f := newFake()
			f.on("GET", "/openapi/v3", reply{200, onlyVersion(t, c.release, c.version)})
			f.on("GET", "/slurm/"+c.version+"/node/"+c.name, reply{200, restFixture(t, c.release, c.version+"/"+c.file)})
			r := newTestREST(t, serve(t, f))
			got, err := r.Node(t.Context(), c.name)
			if err != nil {
				t.Fatal(err)
			}
			assertNode(t, got, c.want)
			req := f.requests()[1]
			if req.user != "slurm" || req.token != testToken {
				t.Errorf("auth headers: user %q token ok=%v", req.user, req.token == testToken)
			}
		})
	}
}

// onlyVersion trims a recorded openapi document to one version's node
// paths, to make discovery choose that version.
func onlyVersion(t *testing.T, release, version string) []byte {
	var doc struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(restFixture(t, release, "openapi.200.json"), &doc); err != nil {
		t.Fatal(err)
	}
	paths := map[string]json.RawMessage{}
	for p, v := range doc.Paths {
		if strings.HasPrefix(p, "/slurm/"+version+"/") {
			paths[p] = v
		}
	}
	if len(paths) == 0 {
		t.Fatalf("%s has no %s paths", release, version)
	}
	b, _ := json.Marshal(map[string]any{"paths": paths})
	return b
}

// Drain and resume through the newest version discovery finds in each
// release's whole recorded /openapi/v3.
func TestRESTDrainResumeRecorded(t *testing.T) {
	for _, c := range []struct{ release, version string }{
		{"slurm-24.11", "v0.0.42"},
		{"slurm-26.05", "v0.0.45"},
	} {
		t.Run(c.release, func(t *testing.T) {
			f := newFake()
			openapiRoute(t, f, c.release)
			path := "/slurm/" + c.version + "/node/gpu001"
			f.on("POST", path,
				reply{200, restFixture(t, c.release, c.version+"/post_drain.200.json")},
				reply{200, restFixture(t, c.release, c.version+"/post_resume.200.json")})
			r := newTestREST(t, serve(t, f))
			reason := `gpuhc: gpu: gpu3: "xid 79" $(reboot); rm -rf /`
			if err := r.Drain(t.Context(), "gpu001", reason); err != nil {
				t.Fatal(err)
			}
			if err := r.Resume(t.Context(), "gpu001"); err != nil {
				t.Fatal(err)
			}
			if got := r.Backend(); got != "rest "+c.version {
				t.Errorf("Backend %q", got)
			}
			reqs := f.requests()
			if len(reqs) != 3 || r.Calls() != 3 || f.count("POST", path) != 2 {
				t.Fatalf("%d requests, Calls %d, %d to %s; want openapi + 2 posts", len(reqs), r.Calls(), f.count("POST", path), path)
			}
			var drain, resume map[string]any
			json.Unmarshal([]byte(reqs[1].body), &drain)
			json.Unmarshal([]byte(reqs[2].body), &resume)
			// Nothing else: reason_uid, deprecated in 26.05's update_node_msg
			// (recorded openapi), is never sent; slurmctld takes the token's user.
			if s, _ := json.Marshal(drain["state"]); string(s) != `["DRAIN"]` || drain["reason"] != reason || len(drain) != 2 {
				t.Errorf("drain body %s", reqs[1].body)
			}
			if s, _ := json.Marshal(resume["state"]); string(s) != `["RESUME"]` || len(resume) != 1 {
				t.Errorf("resume body %s", reqs[2].body)
			}
			// Without it 24.11 answers 400 "Unable to parse query.", 26.05
			// 500 "Unspecified error" (recorded).
			for _, req := range reqs[1:] {
				if req.contentType != "application/json" {
					t.Errorf("POST Content-Type %q", req.contentType)
				}
			}
		})
	}
}

func TestRESTRefusesBeforeSending(t *testing.T) {
	f := newFake()
	r := newTestREST(t, serve(t, f))
	ctx := t.Context()
	if err := r.Drain(ctx, "gpu001", "  "); !errors.Is(err, ErrEmptyReason) {
		t.Errorf("empty reason: %v", err)
	}
	if err := r.Drain(ctx, "gpu001", "two\nlines"); err == nil {
		t.Error("newline in reason accepted")
	}
	for _, name := range []string{"", "../ping", "gpu[001-004]", "gpu001 State=DOWN", "-o", "a/b", "gpu%2f", "é"} {
		if _, err := r.Node(ctx, name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("name %q: %v", name, err)
		}
		if err := r.Resume(ctx, name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("resume %q: %v", name, err)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent for refused calls", n)
	}
}

func TestRESTNoPostOn2205(t *testing.T) {
	f := recordedServer(t, "slurm-22.05", "v0.0.38", "vm", map[string]string{
		"POST /slurm/{v}/node/{n}": "post_drain.405.json",
	})
	r := newTestREST(t, serve(t, f))
	if err := r.Drain(t.Context(), "vm", "gpuhc: x"); !errors.Is(err, ErrNoNodePost) {
		t.Errorf("got %v, want ErrNoNodePost", err)
	}
	if n := f.count("POST", "/slurm/v0.0.38/node/vm"); n != 0 {
		t.Errorf("posted %d times to a GET-only API", n)
	}
	if got := r.Backend(); got != "rest v0.0.38 (read-only)" {
		t.Errorf("Backend %q", got)
	}
}

// Errors carry method, path, status and slurmrestd's own explanation.
func TestRESTErrorMessagesRecorded(t *testing.T) {
	cases := []struct {
		release, version, node, route, file string
		want                                []string
		is                                  error
	}{
		{"slurm-24.11", "v0.0.42", "gpu001", "GET", "unauthorized.511.json",
			[]string{"slurmrestd GET /slurm/v0.0.42/node/gpu001: HTTP 511", "Protocol authentication error [error 1007 in _dump_nodes]", "scontrol token username=slurm"}, ErrUnauthorized},
		{"slurm-24.11", "v0.0.42", "gpu001", "POST", "post_unauthorized.511.json",
			[]string{"POST /slurm/v0.0.42/node/gpu001: HTTP 511", "Failure to update node gpu001"}, ErrUnauthorized},
		{"slurm-24.11", "v0.0.42", "gpu001", "POST", "post_bad_state.500.json",
			[]string{"HTTP 500", `Unknown flag "BOGUS"`, "Invalid node state specified [error 2028 in _update_node]"}, nil},
		{"slurm-24.11", "v0.0.42", "nosuchnode", "POST", "post_unknown_node.500.json",
			[]string{"HTTP 500", "Invalid node name specified [error 2018"}, ErrNodeNotFound},
		{"slurm-24.11", "v0.0.42", "nosuchnode", "GET", "node_unknown.200.json",
			[]string{"HTTP 200", "Failure to query node nosuchnode"}, ErrNodeNotFound},
		{"slurm-24.11", "v0.0.42", "gpu001", "GET", "ctld_down.502.json",
			[]string{"HTTP 502", "Unable to contact slurm controller (connect failure) [error 1800"}, nil},
		// 26.05: a POST to an unknown node is 422 (24.11: 500); a GET is
		// still 200 with error 0; a bad state is 2180, not 2028.
		{"slurm-26.05", "v0.0.45", "nosuchnode", "POST", "post_unknown_node.422.json",
			[]string{"POST /slurm/v0.0.45/node/nosuchnode: HTTP 422", "Failure to update node nosuchnode: Invalid node name specified [error 2018 in _update_node]"}, ErrNodeNotFound},
		{"slurm-26.05", "v0.0.42", "nosuchnode", "POST", "post_unknown_node.422.json",
			[]string{"HTTP 422", "[error 2018"}, ErrNodeNotFound},
		{"slurm-26.05", "v0.0.45", "nosuchnode", "GET", "node_unknown.200.json",
			[]string{"HTTP 200", "Failure to query node nosuchnode"}, ErrNodeNotFound},
		{"slurm-26.05", "v0.0.45", "gpu001", "GET", "unauthorized.511.json",
			[]string{"GET /slurm/v0.0.45/node/gpu001: HTTP 511", "Protocol authentication error [error 1007 in _dump_nodes]", "scontrol token username=slurm"}, ErrUnauthorized},
		{"slurm-26.05", "v0.0.45", "gpu001", "POST", "post_unauthorized.511.json",
			[]string{"POST /slurm/v0.0.45/node/gpu001: HTTP 511", "Failure to update node gpu001"}, ErrUnauthorized},
		{"slurm-26.05", "v0.0.45", "gpu001", "POST", "post_bad_state.500.json",
			[]string{"HTTP 500", `Unknown flag "BOGUS"`, "Invalid node state transition [error 2180 in _update_node]"}, nil},
		{"slurm-26.05", "v0.0.45", "gpu001", "GET", "ctld_down.502.json",
			[]string{"HTTP 502", "Unable to contact slurm controller (connect failure) [error 1800"}, nil},
		{"slurm-26.05", "v0.0.45", "gpu001", "POST", "post_drain_ctld_down.502.json",
			[]string{"HTTP 502", "Failure to update node gpu001: Unable to contact slurm controller"}, nil},
		{"slurm-22.05", "v0.0.38", "nosuchnode", "GET", "node_unknown.500.json",
			[]string{"HTTP 500", "Invalid node name specified [error 2018]"}, ErrNodeNotFound},
		{"slurm-22.05", "v0.0.38", "vm", "GET", "ctld_down.500.json",
			[]string{"GET /slurm/v0.0.38/node/vm: HTTP 500: Unspecified error [error -1]"}, nil},
	}
	for _, c := range cases {
		t.Run(c.release+"/"+c.version+"/"+c.file, func(t *testing.T) {
			f := newFake()
			f.on("GET", "/openapi/v3", reply{200, onlyVersion(t, c.release, c.version)})
			f.on(c.route, "/slurm/"+c.version+"/node/"+c.node, reply{statusOf(t, c.file), restFixture(t, c.release, c.version+"/"+c.file)})
			r := newTestREST(t, serve(t, f))
			var err error
			if c.route == "GET" {
				_, err = r.Node(t.Context(), c.node)
			} else {
				err = r.Drain(t.Context(), c.node, "gpuhc: test")
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			for _, sentinel := range []error{ErrUnauthorized, ErrNodeNotFound} {
				if got := errors.Is(err, sentinel); got != (c.is == sentinel) {
					t.Errorf("errors.Is(err, %v) = %v: %v", sentinel, got, err)
				}
			}
			if strings.Contains(err.Error(), testToken) || strings.Contains(err.Error(), "SIGNATURE") {
				t.Errorf("token in error: %v", err)
			}
		})
	}
}

func TestRESTNonJSONErrorBodies(t *testing.T) {
	f := newFake()
	openapiRoute(t, f, "slurm-24.11")
	f.on("GET", "/slurm/v0.0.42/node/gpu001", reply{401, restFixture(t, "slurm-24.11", "openapi_noauth.401.json")})
	f.on("POST", "/slurm/v0.0.42/node/gpu001", reply{405, restFixture(t, "slurm-22.05", "v0.0.38/post_drain.405.json")})
	r := newTestREST(t, serve(t, f))
	_, err := r.Node(t.Context(), "gpu001")
	if err == nil || !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "HTTP 401: Authentication failure") {
		t.Errorf("401: %v", err)
	}
	err = r.Resume(t.Context(), "gpu001")
	if err == nil || !strings.Contains(err.Error(), "HTTP 405: Requested REST method is not defined at URL") {
		t.Errorf("405: %v", err)
	}
	if n := f.count("POST", "/slurm/v0.0.42/node/gpu001"); n != 1 {
		t.Errorf("4xx sent %d times, want 1 (no retry)", n)
	}
}

func TestRESTRetriesWithBackoff(t *testing.T) {
	down := restFixture(t, "slurm-24.11", "v0.0.42/ctld_down.502.json")
	ok := restFixture(t, "slurm-24.11", "v0.0.42/node_idle.200.json")
	f := newFake()
	openapiRoute(t, f, "slurm-24.11")
	f.on("GET", "/slurm/v0.0.42/node/gpu001", reply{502, down}, reply{502, down}, reply{200, ok})
	s := &noSleep{}
	r := newTestREST(t, serve(t, f), testOpts(s)...)
	if _, err := r.Node(t.Context(), "gpu001"); err != nil {
		t.Fatal(err)
	}
	if n := f.count("GET", "/slurm/v0.0.42/node/gpu001"); n != 3 {
		t.Errorf("%d tries, want 3", n)
	}
	// Ceiling doubles from the base: 100ms then 200ms (jitter returns it).
	if want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}; !equalDurations(s.delays, want) {
		t.Errorf("delays %v, want %v", s.delays, want)
	}
	if r.Calls() != 4 {
		t.Errorf("Calls %d, want 4", r.Calls())
	}
}

func TestRESTGivesUpAfterRetries(t *testing.T) {
	f := newFake()
	openapiRoute(t, f, "slurm-24.11")
	f.on("GET", "/slurm/v0.0.42/node/gpu001", reply{502, restFixture(t, "slurm-24.11", "v0.0.42/ctld_down.502.json")})
	r := newTestREST(t, serve(t, f)) // retries = 2
	_, err := r.Node(t.Context(), "gpu001")
	if err == nil || !strings.Contains(err.Error(), "HTTP 502") {
		t.Fatalf("got %v", err)
	}
	if n := f.count("GET", "/slurm/v0.0.42/node/gpu001"); n != 3 {
		t.Errorf("%d tries, want 1 + 2 retries", n)
	}
}

func TestRESTNoRetryOnDefiniteAnswers(t *testing.T) {
	for _, c := range []struct{ release, version, file string }{
		{"slurm-24.11", "v0.0.42", "post_bad_state.500.json"},
		{"slurm-24.11", "v0.0.42", "post_unknown_node.500.json"},
		{"slurm-24.11", "v0.0.42", "post_unauthorized.511.json"},
		{"slurm-26.05", "v0.0.45", "post_bad_state.500.json"},
		{"slurm-26.05", "v0.0.45", "post_unknown_node.422.json"},
		{"slurm-26.05", "v0.0.45", "post_unauthorized.511.json"},
	} {
		f := newFake()
		openapiRoute(t, f, c.release)
		path := "/slurm/" + c.version + "/node/gpu001"
		f.on("POST", path, reply{statusOf(t, c.file), restFixture(t, c.release, c.version+"/"+c.file)})
		r := newTestREST(t, serve(t, f))
		if err := r.Drain(t.Context(), "gpu001", "gpuhc: x"); err == nil {
			t.Fatalf("%s/%s: no error", c.release, c.file)
		}
		if n := f.count("POST", path); n != 1 {
			t.Errorf("%s/%s: sent %d times, want 1", c.release, c.file, n)
		}
	}
}

func TestRESTRetriesConnectionErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	s := &noSleep{}
	r := newTestREST(t, "http://"+addr, testOpts(s)...)
	_, err = r.Node(t.Context(), "gpu001")
	if err == nil || !strings.Contains(err.Error(), "GET http://"+addr+"/openapi/v3") {
		t.Fatalf("got %v", err)
	}
	if r.Calls() != 3 || len(s.delays) != 2 {
		t.Errorf("Calls %d, sleeps %d; want 3 tries and 2 waits", r.Calls(), len(s.delays))
	}
}

func TestRESTNeverSleepsPastDeadline(t *testing.T) {
	f := newFake()
	f.on("GET", "/openapi/v3", reply{503, []byte("busy")})
	slept := false
	r := newTestREST(t, serve(t, f),
		WithBackoff(time.Hour, time.Hour),
		WithJitter(func(d time.Duration) time.Duration { return d }),
		WithSleep(func(context.Context, time.Duration) error { slept = true; return nil }))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := r.Node(ctx, "gpu001")
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want deadline in the chain", err)
	}
	if slept || time.Since(start) > time.Second {
		t.Errorf("slept=%v after %v; a 1h wait cannot fit a 2s deadline", slept, time.Since(start))
	}
	if n := f.count("GET", "/openapi/v3"); n != 1 {
		t.Errorf("%d tries", n)
	}
}

func TestRESTPerRequestTimeout(t *testing.T) {
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	})
	url := serveHandler(t, h)
	tok := writeToken(t, testToken, 0o600)
	s := &noSleep{}
	r, err := NewREST(url, "slurm", tok, 50*time.Millisecond, 1, testOpts(s)...)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = r.Node(t.Context(), "gpu001")
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v", err)
	}
	if r.Calls() != 2 || time.Since(start) > 2*time.Second {
		t.Errorf("Calls %d after %v; want 2 quick timeouts", r.Calls(), time.Since(start))
	}
}

func TestRESTUnixSocket(t *testing.T) {
	f := recordedServer(t, "slurm-24.11", "v0.0.42", "gpu001", map[string]string{
		"GET /slurm/{v}/node/{n}": "node_drained.200.json",
	})
	sock := filepath.Join(t.TempDir(), "slurmrestd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	r := newTestREST(t, "unix:"+sock)
	n, err := r.Node(t.Context(), "gpu001")
	if err != nil {
		t.Fatal(err)
	}
	if !n.Drained() || n.Reason != ourReason {
		t.Errorf("got %+v", n)
	}
}

func TestNewRESTRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "http://", "unix:relative.sock", "http://u:p@host:1/", "http://h/?q=1", "localhost:6820"} {
		if _, err := NewREST(u, "slurm", "/x", time.Second, 0); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
	if _, err := NewREST("http://h:1", "", "/x", time.Second, 0); err == nil {
		t.Error("empty user accepted")
	}
}

func TestRESTDoesNotFollowRedirects(t *testing.T) {
	other := newFake()
	otherURL := serve(t, other)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherURL+r.URL.Path, http.StatusFound)
	})
	r := newTestREST(t, serveHandler(t, h))
	if _, err := r.Node(t.Context(), "gpu001"); err == nil {
		t.Error("redirect answer accepted")
	}
	if n := len(other.requests()); n != 0 {
		t.Errorf("token sent to the redirect target %d times", n)
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// An unsafe token file is gpuhc's own fault, not Slurm's: the error says
// so (ConfigError), which the prolog uses to exit 0 rather than have
// slurmd drain the node.
func TestUnsafeTokenIsConfigError(t *testing.T) {
	tok := writeToken(t, testToken+"\n", 0o640)
	r, err := NewREST("http://127.0.0.1:1", "slurm", tok, time.Second, 0, testOpts(&noSleep{})...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Node(context.Background(), "gpu001")
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "group- or world-accessible") {
		t.Fatalf("err %v, want a ConfigError about the mode", err)
	}
}

// A node list slower than the per-call timeout (a storm: every failing
// node lists at once) is waited for, once, up to the caller's deadline;
// one that outlasts the deadline is not sent again.
func TestRESTListGetsTheCallersBudgetOnce(t *testing.T) {
	openapi := restFixture(t, "slurm-26.05", "openapi.200.json")
	nodes := restFixture(t, "slurm-26.05", "v0.0.45/nodes_idle.200.json")
	for _, c := range []struct {
		name     string
		delay    time.Duration
		deadline time.Duration
		wantErr  bool
	}{
		{"slower than the per-call timeout, within the deadline", 300 * time.Millisecond, 5 * time.Second, false},
		{"past the caller's deadline", 5 * time.Second, 400 * time.Millisecond, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var lists atomic.Int32
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/openapi/v3" {
					w.Write(openapi)
					return
				}
				lists.Add(1)
				select {
				case <-time.After(c.delay):
					w.Write(nodes)
				case <-r.Context().Done():
				}
			})
			tok := writeToken(t, testToken, 0o600)
			r, err := NewREST(serveHandler(t, h), "slurm", tok, 50*time.Millisecond, 3, testOpts(&noSleep{})...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), c.deadline)
			defer cancel()
			ns, err := r.Nodes(ctx)
			if (err != nil) != c.wantErr || (!c.wantErr && len(ns) == 0) {
				t.Errorf("got %d nodes, %v", len(ns), err)
			}
			if c.wantErr && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err %v, want the deadline in the chain", err)
			}
			if n := lists.Load(); n != 1 {
				t.Errorf("list sent %d times, want once", n)
			}
		})
	}
}
