package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func newTestScontrol(t *testing.T, f *fakeScontrol, opts ...Option) *Scontrol {
	t.Helper()
	s, err := NewScontrol(f.path, 5*time.Second, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestScontrolNodeRecorded(t *testing.T) {
	for _, c := range []struct{ release, file, name, state string }{
		{"slurm-24.11", "show_node_drained", "gpu001", "IDLE+DRAIN"},
		{"slurm-24.11", "show_node_idle", "gpu001", "IDLE"},
		{"slurm-22.05", "show_node_drained", "vm", "IDLE+DRAIN"},
		{"slurm-26.05", "show_node_drained", "gpu001", "IDLE+DRAIN"},
		{"slurm-26.05", "show_node_resumed", "gpu001", "IDLE+NOT_RESPONDING"},
	} {
		f := newFakeScontrol(t)
		f.recorded(-1, c.release, c.file)
		s := newTestScontrol(t, f)
		n, err := s.Node(t.Context(), c.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(n.State, "+"); got != c.state {
			t.Errorf("%s/%s: state %s, want %s", c.release, c.file, got, c.state)
		}
		if want := []string{"-o", "show", "node", c.name}; !reflect.DeepEqual(f.argv(0), want) {
			t.Errorf("argv %q, want %q", f.argv(0), want)
		}
		if s.Calls() != 1 {
			t.Errorf("Calls %d", s.Calls())
		}
	}
}

func TestScontrolDrainArgvIsLiteral(t *testing.T) {
	f := newFakeScontrol(t)
	s := newTestScontrol(t, f)
	canary := filepath.Join(f.dir, "pwned")
	reason := `gpuhc: gpu: gpu3: $(touch ` + canary + `); rm -rf / "quoted" 'single' ` + "`id`" + ` a;b|c&d>e<f *`
	if err := s.Drain(t.Context(), "gpu001", reason); err != nil {
		t.Fatal(err)
	}
	want := []string{"update", "NodeName=gpu001", "State=DRAIN", "Reason=" + reason}
	if got := f.argv(0); !reflect.DeepEqual(got, want) {
		t.Errorf("argv\n got %q\nwant %q", got, want)
	}
	if _, err := os.Stat(canary); err == nil {
		t.Error("the reason was run by a shell")
	}
	if err := s.Resume(t.Context(), "gpu001"); err != nil {
		t.Fatal(err)
	}
	if got, want := f.argv(1), []string{"update", "NodeName=gpu001", "State=RESUME"}; !reflect.DeepEqual(got, want) {
		t.Errorf("resume argv %q, want %q", got, want)
	}
}

func TestScontrolFixedEnvironment(t *testing.T) {
	t.Setenv("SLURM_CONF", "/etc/slurm-site/slurm.conf")
	t.Setenv("SLURM_TIME_FORMAT", "relative")
	t.Setenv("GPUHC_TEST_LEAK", "yes")
	t.Setenv("PATH", "/nonexistent")
	f := newFakeScontrol(t)
	f.recorded(-1, "slurm-24.11", "show_node_idle")
	if _, err := newTestScontrol(t, f).Node(t.Context(), "gpu001"); err != nil {
		t.Fatal(err)
	}
	env := f.env(0)
	for _, want := range []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "TZ=UTC0", "SLURM_CONF=/etc/slurm-site/slurm.conf"} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %s: %q", want, env)
		}
	}
	for _, e := range env {
		if strings.HasPrefix(e, "SLURM_TIME_FORMAT=") || strings.HasPrefix(e, "GPUHC_TEST_LEAK=") {
			t.Errorf("leaked %s", e)
		}
	}
}

func TestScontrolFailuresRecorded(t *testing.T) {
	cases := []struct {
		release, file string
		op            string
		want          string
		is            error
	}{
		{"slurm-24.11", "update_bad_state", "drain", "Invalid input: State=BOGUS Request aborted", nil},
		{"slurm-22.05", "update_ctld_down", "drain", "slurm_update error: Unable to contact slurm controller (connect failure)", nil},
		{"slurm-24.11", "update_ctld_down", "resume", "slurm_update error: Unable to contact slurm controller (connect failure)", nil},
		{"slurm-24.11", "show_node_ctld_down", "node", "slurm_load_node error: Unable to contact slurm controller", nil},
		{"slurm-24.11", "update_unknown_node", "resume", "Invalid node name specified", ErrNodeNotFound},
		{"slurm-22.05", "show_node_unknown", "node", "Node nosuchnode not found", ErrNodeNotFound},
		{"slurm-24.11", "show_node_unknown", "node", "Node nosuchnode not found", ErrNodeNotFound},
		{"slurm-22.05", "show_node_ctld_down", "node", "slurm_load_node error: Unable to contact slurm controller", nil},
		{"slurm-26.05", "update_bad_state", "drain", "Invalid input: State=BOGUS Request aborted", nil},
		{"slurm-26.05", "update_ctld_down", "drain", "slurm_update error: Unable to contact slurm controller (connect failure)", nil},
		{"slurm-26.05", "show_node_ctld_down", "node", "slurm_load_node error: Unable to contact slurm controller", nil},
		{"slurm-26.05", "update_unknown_node", "drain", "Invalid node name specified", ErrNodeNotFound},
		{"slurm-26.05", "show_node_unknown", "node", "Node nosuchnode not found", ErrNodeNotFound},
	}
	for _, c := range cases {
		f := newFakeScontrol(t)
		f.recorded(-1, c.release, c.file)
		s := newTestScontrol(t, f)
		var err error
		switch c.op {
		case "drain":
			err = s.Drain(t.Context(), "nosuchnode", "gpuhc: x")
		case "resume":
			err = s.Resume(t.Context(), "nosuchnode")
		default:
			_, err = s.Node(t.Context(), "nosuchnode")
		}
		if err == nil {
			t.Fatalf("%s/%s: no error", c.release, c.file)
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "exit status 1") {
			t.Errorf("%s/%s: %v", c.release, c.file, err)
		}
		var se *ScontrolError
		if !errors.As(err, &se) || se.ExitCode() != 1 {
			t.Errorf("%s/%s: not a ScontrolError with exit 1: %v", c.release, c.file, err)
		}
		if (c.is != nil) != errors.Is(err, ErrNodeNotFound) {
			t.Errorf("%s/%s: ErrNodeNotFound=%v: %v", c.release, c.file, errors.Is(err, ErrNodeNotFound), err)
		}
	}
}

func TestScontrolGarbageOutputIsAnError(t *testing.T) {
	f := newFakeScontrol(t)
	f.answer(-1, []byte("Segmentation fault? NodeName=gpu001 State=IDLE\n"), nil, 0)
	if n, err := newTestScontrol(t, f).Node(t.Context(), "gpu001"); err == nil {
		t.Errorf("accepted as %+v", n)
	}
}

func TestScontrolTimeout(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "scontrol")
	os.WriteFile(path, []byte("#!/bin/sh\nexec /bin/sleep 30\n"), 0o755)
	s, err := NewScontrol(path, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = s.Node(t.Context(), "gpu001")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestScontrolPathAndValidation(t *testing.T) {
	if _, err := NewScontrol("scontrol", time.Second); err == nil {
		t.Error("relative path accepted")
	}
	s, err := NewScontrol("", time.Second)
	if err != nil || s.path != DefaultScontrol {
		t.Errorf("default path: %v %q", err, s.path)
	}
	missing, _ := NewScontrol("/nonexistent/scontrol", time.Second)
	if _, err := missing.Node(t.Context(), "gpu001"); err == nil || !strings.Contains(err.Error(), "/nonexistent/scontrol") {
		t.Errorf("missing binary: %v", err)
	}
	f := newFakeScontrol(t)
	s = newTestScontrol(t, f)
	if err := s.Drain(t.Context(), "gpu001", ""); !errors.Is(err, ErrEmptyReason) {
		t.Errorf("empty reason: %v", err)
	}
	if err := s.Drain(t.Context(), "gpu001 State=DOWN", "x"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad name: %v", err)
	}
	if err := s.Resume(t.Context(), "-h"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("option as name: %v", err)
	}
	if f.runs() != 0 {
		t.Errorf("ran %d times for refused calls", f.runs())
	}
}
