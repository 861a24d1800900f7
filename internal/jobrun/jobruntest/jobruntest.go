// Package jobruntest is the test bed of gpuhc-prolog's and gpuhc-epilog's
// tests: a node in a temporary directory (fixture root, configuration,
// state directory, event log) and an in-memory slurmctld that records
// every call. Its event log reader and fake CUDA driver serve
// gpuhc-healthcheck's tests too.
package jobruntest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// Slurm is one node's slurmctld: it keeps the node's state and records
// every call, in order, as "get", "list", "drain <reason>", "resume",
// "comment <job> <text>".
type Slurm struct {
	mu       sync.Mutex
	node     slurm.Node
	calls    []string
	DrainErr error
	// Others are the rest of the cluster, for the storm guard's count.
	Others []slurm.Node
	// OnDrain runs inside Drain, before it answers: tests look at what
	// the program had done by then.
	OnDrain func()
	// CommentErr is what SetAdminComment answers.
	CommentErr error
}

// NewSlurm returns an idle node.
func NewSlurm(name string) *Slurm {
	return &Slurm{node: slurm.Node{Name: name, State: []string{"IDLE"}}}
}

// Controller is what jobrun.Program.Controller wants.
func (s *Slurm) Controller(config.Slurm, logrus.FieldLogger) (slurm.Controller, error) { return s, nil }

// Calls returns the calls so far.
func (s *Slurm) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// Current returns the node as slurmctld has it.
func (s *Slurm) Current() slurm.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node
}

// SetNode replaces the node's state and reason.
func (s *Slurm) SetNode(n slurm.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.node = n
}

func (s *Slurm) record(c string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

// Backend implements slurm.Controller.
func (s *Slurm) Backend() string { return "fake" }

// Node implements slurm.Controller.
func (s *Slurm) Node(_ context.Context, name string) (slurm.Node, error) {
	s.record("get")
	return s.Current(), nil
}

// Nodes implements slurm.Controller: this node and Others.
func (s *Slurm) Nodes(context.Context) ([]slurm.Node, error) {
	s.record("list")
	return append([]slurm.Node{s.Current()}, s.Others...), nil
}

// Drain implements slurm.Controller.
func (s *Slurm) Drain(_ context.Context, name, reason string) error {
	s.record("drain " + reason)
	if s.OnDrain != nil {
		s.OnDrain()
	}
	if s.DrainErr != nil {
		return s.DrainErr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.node.State = append(s.node.State, "DRAIN")
	s.node.Reason = reason
	return nil
}

// SetAdminComment implements slurm.JobCommenter: it records
// "comment JOBID TEXT".
func (s *Slurm) SetAdminComment(_ context.Context, jobID, comment string) error {
	s.record("comment " + jobID + " " + comment)
	return s.CommentErr
}

// Resume implements slurm.Controller.
func (s *Slurm) Resume(_ context.Context, name string) error {
	s.record("resume")
	s.mu.Lock()
	defer s.mu.Unlock()
	var st []string
	for _, x := range s.node.State {
		if x != "DRAIN" {
			st = append(st, x)
		}
	}
	s.node.State = st
	return nil
}

// Bed is a node in a temporary directory.
type Bed struct {
	Dir, Config, Root, State, Events, Lock string
}

// NewBed writes a configuration with extra TOML appended: sections of its
// own ([prolog], [epilog], [checks.*]); a leading [policy] section's keys
// join the bed's own [policy].
func NewBed(t *testing.T, extra string) Bed {
	t.Helper()
	dir := t.TempDir()
	b := Bed{Dir: dir, Config: filepath.Join(dir, "gpuhc.toml"), Root: filepath.Join(dir, "root"),
		State: filepath.Join(dir, "state"), Events: filepath.Join(dir, "events.jsonl"), Lock: filepath.Join(dir, "hc.lock")}
	if err := os.MkdirAll(filepath.Join(b.Root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	pol := ""
	if rest, ok := strings.CutPrefix(extra, "[policy]\n"); ok {
		i := strings.Index(rest, "\n[")
		if i < 0 {
			i = len(rest)
		}
		pol, extra = rest[:i], rest[i:]
	}
	cfg := fmt.Sprintf(`root = %q
state_dir = %q
lock_file = %q
[events]
file = %q
[policy]
storm_jitter = "0s"
%s
[slurm]
scontrol = "/nonexistent/scontrol"
%s`, b.Root, b.State, b.Lock, b.Events, pol, extra)
	if err := os.WriteFile(b.Config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// Env is a job's environment: slurmd's variables for a job run on
// gpu001 by uid 1001, with kv overriding ("" unsets).
func Env(context string, kv ...string) func(string) string {
	m := map[string]string{
		"SLURMD_NODENAME": "gpu001", "SLURM_JOB_ID": "4242", "SLURM_JOB_UID": "1001", "SLURM_JOB_USER": "alice",
		"SLURM_JOB_PARTITION": "gpu", "SLURM_SCRIPT_CONTEXT": context, "SLURM_JOB_NODELIST": "gpu001",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(m, kv[i])
		} else {
			m[kv[i]] = kv[i+1]
		}
	}
	return func(k string) string { return m[k] }
}

// ReadEvents reads the event log; none when it does not exist.
func (b Bed) ReadEvents(t *testing.T) []events.Event {
	t.Helper()
	return ReadEventLog(t, b.Events)
}

// ReadEventLog reads the event log at path; none when it does not exist.
func ReadEventLog(t *testing.T, path string) []events.Event {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []events.Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev events.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("event log line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}

// FakeCUDA builds internal/bandwidth's fake CUDA driver (host memcpy
// behind the driver API, testdata/fakecuda.c there) with gcc, for runs
// that measure bandwidth on a machine without a GPU, and sets it to two
// healthy GPUs. It skips the test without gcc.
func FakeCUDA(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: cannot build the fake libcuda")
	}
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no source path for jobruntest")
	}
	src := filepath.Join(filepath.Dir(self), "..", "..", "bandwidth", "testdata", "fakecuda.c")
	lib := filepath.Join(t.TempDir(), "libfakecuda.so.1")
	if out, err := exec.Command(gcc, "-shared", "-fPIC", "-Wall", "-Werror", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("building the fake libcuda: %v\n%s", err, out)
	}
	for _, k := range []string{"FAKECUDA_NAME", "FAKECUDA_FAIL", "FAKECUDA_HANG", "FAKECUDA_GBPS", "FAKECUDA_GBPS_ON", "FAKECUDA_NOPEER"} {
		t.Setenv(k, "")
	}
	t.Setenv("FAKECUDA_DEVICES", "2")
	return lib
}

// FakeCUDAConfig is a [checks.bandwidth] section that measures the fake
// driver at lib (FakeCUDA), judged (but for P2P) against a floor of
// 0.2 GB/s.
func FakeCUDAConfig(lib string) string {
	return fmt.Sprintf(`[checks.bandwidth]
libcuda = %q
size = "4MiB"
iterations = 2
[[checks.bandwidth.floor]]
model = "Fake GPU"
h2d_gbps = 0.2
d2h_gbps = 0.2
d2d_gbps = 0.2
p2p_gbps = 0.0
`, lib)
}

// Kinds lists the events' kinds.
func Kinds(evs []events.Event) string {
	var k []string
	for _, ev := range evs {
		k = append(k, ev.Kind)
	}
	return strings.Join(k, ",")
}

// WriteProc makes a process in the fixture root: /proc/<pid>/status with
// the uid (all four ids), and its cgroup and environment when given.
func (b Bed) WriteProc(t *testing.T, pid, uid int, comm, cgroup, environ string) {
	t.Helper()
	dir := filepath.Join(b.Root, "proc", fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	status := fmt.Sprintf("Name:\t%s\nState:\tS (sleeping)\nPid:\t%d\nUid:\t%d\t%d\t%d\t%d\nGid:\t100\t100\t100\t100\n", comm, pid, uid, uid, uid, uid)
	files := map[string]string{"status": status, "cgroup": cgroup, "environ": environ}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
