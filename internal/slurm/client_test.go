package slurm

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/gpuhc/gpuhc/internal/config"
)

// bed is a Client wired to a fake slurmrestd and a fake scontrol.
type bed struct {
	rest *fakeSlurmrestd
	sc   *fakeScontrol
	log  *logtest.Hook
	c    *Client
	cfg  config.Slurm
}

func newBed(t *testing.T, backend string, setup func(*fakeSlurmrestd)) *bed {
	t.Helper()
	b := &bed{rest: newFake(), sc: newFakeScontrol(t)}
	if setup != nil {
		setup(b.rest)
	}
	b.cfg = restConfig(t, backend, serve(t, b.rest))
	b.cfg.Scontrol = b.sc.path
	logger, hook := logtest.NewNullLogger()
	b.log = hook
	opts := append(testOpts(&noSleep{}), WithLogger(logger))
	c, err := New(b.cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	b.c = c
	return b
}

func (b *bed) logText() string {
	var s []string
	for _, e := range b.log.AllEntries() {
		line, _ := e.String()
		s = append(s, line)
	}
	return strings.Join(s, "\n")
}

func TestNewMakesNoCalls(t *testing.T) {
	for _, backend := range []string{"auto", "rest", "scontrol", ""} {
		b := newBed(t, backend, func(f *fakeSlurmrestd) { openapiRoute(t, f, "slurm-24.11") })
		if n := len(b.rest.requests()); n != 0 {
			t.Errorf("%q: %d HTTP requests on construction", backend, n)
		}
		if n := b.sc.runs(); n != 0 {
			t.Errorf("%q: scontrol ran %d times on construction", backend, n)
		}
		if b.c.Calls() != 0 {
			t.Errorf("%q: Calls %d", backend, b.c.Calls())
		}
	}
	// Nor does it read the token file: a broken one is only an error when used.
	cfg := restConfig(t, "auto", "http://127.0.0.1:1")
	cfg.TokenFile = "/nonexistent/token"
	if _, err := New(cfg); err != nil {
		t.Errorf("New read the token file: %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	good := config.Default().Slurm
	cases := map[string]func(*config.Slurm){
		"unknown backend":   func(c *config.Slurm) { c.Backend = "slurmrestd" },
		"rest without url":  func(c *config.Slurm) { c.Backend = "rest"; c.URL = "" },
		"relative scontrol": func(c *config.Slurm) { c.Scontrol = "bin/scontrol" },
		"bad url in rest":   func(c *config.Slurm) { c.Backend = "rest"; c.URL = "tcp://x" },
	}
	for name, mut := range cases {
		c := good
		mut(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// auto keeps scontrol when the REST settings are unusable: losing the
	// drain to a typo in slurm.url would be worse than losing REST.
	c := good
	c.URL = "tcp://x"
	if cl, err := New(c); err != nil || cl.rest != nil || cl.sc == nil {
		t.Errorf("auto with a bad url must fall back to scontrol only: %v", err)
	}
	c.URL = ""
	cl, err := New(c)
	if err != nil || cl.rest != nil || cl.sc == nil {
		t.Errorf("auto without url must be scontrol only: %v", err)
	}
}

func TestAutoUsesRESTOn2411(t *testing.T) {
	b := newBed(t, "auto", func(f *fakeSlurmrestd) {
		openapiRoute(t, f, "slurm-24.11")
		f.on("GET", "/slurm/v0.0.42/node/gpu001", reply{200, restFixture(t, "slurm-24.11", "v0.0.42/node_drained.200.json")})
		f.on("POST", "/slurm/v0.0.42/node/gpu001", reply{200, restFixture(t, "slurm-24.11", "v0.0.42/post_resume.200.json")})
	})
	if got := b.c.Backend(); got != "auto" {
		t.Errorf("Backend before use %q", got)
	}
	n, err := b.c.Node(t.Context(), "gpu001")
	if err != nil || !n.Drained() {
		t.Fatalf("%+v %v", n, err)
	}
	if err := b.c.Resume(t.Context(), "gpu001"); err != nil {
		t.Fatal(err)
	}
	if got := b.c.Backend(); got != "rest v0.0.42" {
		t.Errorf("Backend %q", got)
	}
	if b.sc.runs() != 0 || b.c.Calls() != 3 {
		t.Errorf("scontrol runs %d, Calls %d; want 0 and 3", b.sc.runs(), b.c.Calls())
	}
}

// 26.05 serves v0.0.42-45; auto reads, drains and resumes through v0.0.45
// and reads the node RESUME left without a reason (recorded).
func TestAutoUsesRESTOn2605(t *testing.T) {
	const path = "/slurm/v0.0.45/node/gpu001"
	fx := func(file string) []byte { return restFixture(t, "slurm-26.05", "v0.0.45/"+file) }
	b := newBed(t, "auto", func(f *fakeSlurmrestd) {
		openapiRoute(t, f, "slurm-26.05")
		f.on("GET", path, reply{200, fx("node_idle.200.json")}, reply{200, fx("node_drained.200.json")},
			reply{200, fx("node_resumed_settled.200.json")})
		f.on("POST", path, reply{200, fx("post_drain.200.json")}, reply{200, fx("post_resume.200.json")})
	})
	ctx := t.Context()
	if n, err := b.c.Node(ctx, "gpu001"); err != nil || n.Drained() {
		t.Fatalf("idle: %+v %v", n, err)
	}
	if err := b.c.Drain(ctx, "gpu001", ourReason); err != nil {
		t.Fatal(err)
	}
	if n, err := b.c.Node(ctx, "gpu001"); err != nil || !n.Drained() || n.Reason != ourReason || n.ReasonUser != "slurm" {
		t.Fatalf("drained: %+v %v", n, err)
	}
	if err := b.c.Resume(ctx, "gpu001"); err != nil {
		t.Fatal(err)
	}
	if n, err := b.c.Node(ctx, "gpu001"); err != nil || n.Drained() || n.Reason != "" || n.ReasonUser != "" {
		t.Fatalf("resumed: %+v %v", n, err)
	}
	if got := b.c.Backend(); got != "rest v0.0.45" {
		t.Errorf("Backend %q", got)
	}
	if b.sc.runs() != 0 || b.c.Calls() != 6 || b.rest.count("GET", "/openapi/v3") != 1 ||
		b.rest.count("GET", path) != 3 || b.rest.count("POST", path) != 2 {
		t.Errorf("scontrol runs %d, Calls %d; want 0 and discovery + 5 to %s: %+v", b.sc.runs(), b.c.Calls(), path, b.rest.requests())
	}
}

func TestAutoUsesScontrolOn2205(t *testing.T) {
	b := newBed(t, "auto", func(f *fakeSlurmrestd) {
		openapiRoute(t, f, "slurm-22.05")
		f.on("GET", "/slurm/v0.0.38/node/vm", reply{200, restFixture(t, "slurm-22.05", "v0.0.38/node_drained.200.json")})
	})
	b.sc.recorded(0, "slurm-22.05", "show_node_drained")
	b.sc.recorded(1, "slurm-22.05", "update_resume")
	n, err := b.c.Node(t.Context(), "vm")
	if err != nil || !n.Drained() {
		t.Fatalf("%+v %v", n, err)
	}
	if err := b.c.Resume(t.Context(), "vm"); err != nil {
		t.Fatal(err)
	}
	if got := b.c.Backend(); got != "scontrol" {
		t.Errorf("Backend %q", got)
	}
	// One discovery, no REST read (REST could read but not drain), two runs.
	if len(b.rest.requests()) != 1 || b.sc.runs() != 2 || b.c.Calls() != 3 {
		t.Errorf("http %d, scontrol %d, Calls %d", len(b.rest.requests()), b.sc.runs(), b.c.Calls())
	}
	if !strings.Contains(b.logText(), "cannot change nodes") || b.log.LastEntry().Level != logrus.InfoLevel {
		t.Errorf("log: %s", b.logText())
	}
}

func TestAutoFallsBackWhenRESTFails(t *testing.T) {
	down := restFixture(t, "slurm-24.11", "v0.0.42/post_drain_ctld_down.502.json")
	b := newBed(t, "auto", func(f *fakeSlurmrestd) {
		openapiRoute(t, f, "slurm-24.11")
		f.on("POST", "/slurm/v0.0.42/node/gpu001", reply{502, down})
	})
	b.sc.recorded(-1, "slurm-24.11", "update_drain")
	reason := "gpuhc: gpu: gpu3: xid 79 $(reboot)"
	if err := b.c.Drain(t.Context(), "gpu001", reason); err != nil {
		t.Fatal(err)
	}
	if got, want := b.sc.argv(0), []string{"update", "NodeName=gpu001", "State=DRAIN", "Reason=" + reason}; !reflect.DeepEqual(got, want) {
		t.Errorf("argv %q", got)
	}
	if n := b.rest.count("POST", "/slurm/v0.0.42/node/gpu001"); n != 3 {
		t.Errorf("REST tried %d times, want 1 + 2 retries", n)
	}
	if b.c.Backend() != "scontrol" || b.c.Calls() != 1+3+1 {
		t.Errorf("Backend %q Calls %d", b.c.Backend(), b.c.Calls())
	}
	entry := b.log.LastEntry()
	if entry == nil || entry.Level != logrus.WarnLevel || !strings.Contains(b.logText(), "HTTP 502: Failure to update node gpu001: Unable to contact slurm controller") {
		t.Errorf("log: %s", b.logText())
	}
	// REST is not tried again by this client.
	b.c.Resume(t.Context(), "gpu001")
	if len(b.rest.requests()) != 4 || b.sc.runs() != 2 {
		t.Errorf("after fallback: http %d, scontrol %d", len(b.rest.requests()), b.sc.runs())
	}
}

func TestAutoFallsBackOnRefusedToken(t *testing.T) {
	b := newBed(t, "auto", func(f *fakeSlurmrestd) {
		openapiRoute(t, f, "slurm-24.11")
		f.on("GET", "/slurm/v0.0.42/node/gpu001", reply{511, restFixture(t, "slurm-24.11", "v0.0.42/unauthorized.511.json")})
	})
	b.sc.recorded(-1, "slurm-24.11", "show_node_foreign")
	n, err := b.c.Node(t.Context(), "gpu001")
	if err != nil || n.Reason != "maintenance" {
		t.Fatalf("%+v %v", n, err)
	}
	if c := b.rest.count("GET", "/slurm/v0.0.42/node/gpu001"); c != 1 {
		t.Errorf("refused token retried: %d tries", c)
	}
	text := b.logText()
	if !strings.Contains(text, "Protocol authentication error") || !strings.Contains(text, b.cfg.TokenFile) {
		t.Errorf("log does not explain: %s", text)
	}
	if strings.Contains(text, testToken) {
		t.Error("token in log")
	}
}

func TestAutoFallsBackOnUnsafeTokenFile(t *testing.T) {
	b := newBed(t, "auto", func(f *fakeSlurmrestd) { openapiRoute(t, f, "slurm-24.11") })
	if err := chmod(b.cfg.TokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	b.sc.recorded(-1, "slurm-24.11", "show_node_idle")
	if _, err := b.c.Node(t.Context(), "gpu001"); err != nil {
		t.Fatal(err)
	}
	if len(b.rest.requests()) != 0 {
		t.Error("sent a request with a token from an unsafe file")
	}
	if !strings.Contains(b.logText(), "mode 0644") {
		t.Errorf("log: %s", b.logText())
	}
}

func TestRESTModeDoesNotFallBack(t *testing.T) {
	b := newBed(t, "rest", func(f *fakeSlurmrestd) {
		openapiRoute(t, f, "slurm-24.11")
		f.on("POST", "/slurm/v0.0.42/node/gpu001", reply{500, restFixture(t, "slurm-24.11", "v0.0.42/post_bad_state.500.json")})
	})
	err := b.c.Drain(t.Context(), "gpu001", "gpuhc: x")
	if err == nil || !strings.Contains(err.Error(), "Invalid node state specified") {
		t.Errorf("got %v", err)
	}
	if b.sc.runs() != 0 {
		t.Error("rest mode ran scontrol")
	}
	if b.c.Backend() != "rest v0.0.42" {
		t.Errorf("Backend %q", b.c.Backend())
	}
}

func TestScontrolModeMakesNoHTTP(t *testing.T) {
	b := newBed(t, "scontrol", func(f *fakeSlurmrestd) { openapiRoute(t, f, "slurm-24.11") })
	b.sc.recorded(-1, "slurm-24.11", "show_node_idle")
	if _, err := b.c.Node(t.Context(), "gpu001"); err != nil {
		t.Fatal(err)
	}
	if len(b.rest.requests()) != 0 || b.c.Backend() != "scontrol" || b.c.Calls() != 1 {
		t.Errorf("http %d Backend %q Calls %d", len(b.rest.requests()), b.c.Backend(), b.c.Calls())
	}
}

func TestClientRefusesBeforeAnyCall(t *testing.T) {
	b := newBed(t, "auto", func(f *fakeSlurmrestd) { openapiRoute(t, f, "slurm-24.11") })
	ctx := t.Context()
	if err := b.c.Drain(ctx, "gpu001", ""); !errors.Is(err, ErrEmptyReason) {
		t.Errorf("empty reason: %v", err)
	}
	if err := b.c.Drain(ctx, "gpu[001-002]", "gpuhc: x"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("hostlist: %v", err)
	}
	if _, err := b.c.Node(ctx, "../x"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("path: %v", err)
	}
	if err := b.c.Resume(ctx, ""); !errors.Is(err, ErrInvalidName) {
		t.Errorf("empty: %v", err)
	}
	if b.c.Calls() != 0 || len(b.log.AllEntries()) != 0 {
		t.Errorf("Calls %d, log %s", b.c.Calls(), b.logText())
	}
}

func TestNoFallbackOnceContextEnded(t *testing.T) {
	b := newBed(t, "auto", func(f *fakeSlurmrestd) { openapiRoute(t, f, "slurm-24.11") })
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.c.Node(ctx, "gpu001"); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v", err)
	}
	if b.sc.runs() != 0 {
		t.Error("ran scontrol after the context ended")
	}
}

func TestSharedCounter(t *testing.T) {
	var cnt Counter
	sc := newFakeScontrol(t)
	sc.recorded(-1, "slurm-24.11", "show_node_idle")
	cfg := config.Default().Slurm
	cfg.Backend, cfg.Scontrol = "scontrol", sc.path
	c, err := New(cfg, WithCounter(&cnt))
	if err != nil {
		t.Fatal(err)
	}
	c.Node(t.Context(), "gpu001")
	c.Node(t.Context(), "gpu001")
	if cnt.Load() != 2 || c.Calls() != 2 {
		t.Errorf("counter %d, Calls %d", cnt.Load(), c.Calls())
	}
}

// Slurm's "no such node" is an answer, not a fault: scontrol would say
// the same. 24.11 and 26.05 GET: HTTP 200, error 0; POST: 500 (24.11) or
// 422 (26.05), error 2018 (recorded).
func TestAutoDoesNotFallBackOnUnknownNode(t *testing.T) {
	for _, c := range []struct{ release, version, method, file string }{
		{"slurm-24.11", "v0.0.42", "GET", "node_unknown.200.json"},
		{"slurm-24.11", "v0.0.42", "POST", "post_unknown_node.500.json"},
		{"slurm-26.05", "v0.0.45", "GET", "node_unknown.200.json"},
		{"slurm-26.05", "v0.0.45", "POST", "post_unknown_node.422.json"},
	} {
		t.Run(c.release+"/"+c.file, func(t *testing.T) {
			path := "/slurm/" + c.version + "/node/nosuchnode"
			b := newBed(t, "auto", func(f *fakeSlurmrestd) {
				openapiRoute(t, f, c.release)
				f.on(c.method, path, reply{statusOf(t, c.file), restFixture(t, c.release, c.version+"/"+c.file)})
			})
			var err error
			if c.method == "GET" {
				_, err = b.c.Node(t.Context(), "nosuchnode")
			} else {
				err = b.c.Drain(t.Context(), "nosuchnode", ourReason)
			}
			if !errors.Is(err, ErrNodeNotFound) {
				t.Errorf("got %v", err)
			}
			if b.sc.runs() != 0 || b.c.Backend() != "rest "+c.version || b.rest.count(c.method, path) != 1 {
				t.Errorf("scontrol runs %d, Backend %q, %d tries", b.sc.runs(), b.c.Backend(), b.rest.count(c.method, path))
			}
		})
	}
}
