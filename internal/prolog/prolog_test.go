package prolog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/jobrecord"
	"github.com/gpuhc/gpuhc/internal/jobrun/jobruntest"
	"github.com/gpuhc/gpuhc/internal/lock"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/runenv"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

type result struct {
	code        int
	out, stderr string
}

func runProlog(t *testing.T, b jobruntest.Bed, s *jobruntest.Slurm, getenv func(string) string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	p := Program{
		Process: runenv.Process{
			Args: append([]string{"--config", b.Config}, args...), Getenv: getenv,
			Hostname: func() (string, error) { return "", errors.New("no host name in tests") },
			Stdout:   &out, Stderr: &errb,
			Exit: func(c int) { t.Fatalf("watchdog fired with %d", c) },
		},
		Controller: s.Controller,
	}
	code := p.Main()
	return result{code, out.String(), errb.String()}
}

const xid79 = "gpuhc: gpu.xid: gpu3 (SN 1654922000003, 0000:5d:00.0): XID 79 GPU has fallen off the bus [simulated]"

func prologEvent(t *testing.T, evs []events.Event) events.Event {
	t.Helper()
	for _, ev := range evs {
		if ev.Kind == events.KindProlog {
			return ev
		}
	}
	t.Fatalf("no prolog event in %s", jobruntest.Kinds(evs))
	return events.Event{}
}

// A healthy node: every check OK, no Slurm call, exit 0, a prolog event
// with the job and its mode, and the job's record for the epilog.
func TestHealthyPrologIsSilent(t *testing.T) {
	for _, mode := range []string{"quick", "full"} {
		t.Run(mode, func(t *testing.T) {
			// No CUDA here: the in-process bandwidth measurement is off.
			b, s := jobruntest.NewBed(t, "[checks.bandwidth]\nlibcuda = \"\"\n"), jobruntest.NewSlurm("gpu001")
			r := runProlog(t, b, s, jobruntest.Env("prolog_slurmd", "SPANK_GPUHC_MODE", mode), "--simulate", "dgxh100")
			if r.code != 0 {
				t.Fatalf("exit %d\n%s%s", r.code, r.out, r.stderr)
			}
			for _, line := range strings.Split(r.out, "\n") {
				if strings.Contains(line, " FAIL ") || strings.Contains(line, " WARN ") || strings.Contains(line, " ERROR ") {
					t.Errorf("healthy node reported %q", line)
				}
			}
			if !strings.Contains(r.out, "gpu001: OK:") || !strings.Contains(r.out, "mode "+mode) || len(s.Calls()) != 0 {
				t.Errorf("calls %q\n%s", s.Calls(), r.out)
			}
			evs := b.ReadEvents(t)
			ev := prologEvent(t, evs)
			if len(evs) != 1 || ev.Mode != mode || ev.JobID != "4242" || ev.User != "alice" || ev.Status != "OK" || ev.By != "prolog" {
				t.Errorf("events %+v", evs)
			}
			// Full mode runs the full checks too.
			if got := strings.Contains(r.out, "bandwidth "); got != (mode == "full") {
				t.Errorf("bandwidth listed %v in mode %s:\n%s", got, mode, r.out)
			}
			rec, err := jobrecord.Store{Dir: jobrecord.Dir(filepath.Join(b.State, "simulated"))}.Load("4242")
			if err != nil || !rec.KmsgOK || len(rec.GPUs) != 8 || rec.UID != 1001 {
				t.Errorf("job record %+v %v", rec, err)
			}
		})
	}
}

// The drain with our reason comes first, then the exit code 1 (Slurm
// requeues the job, and keeps our reason).
func TestFailingPrologDrainsFirstThenExits1(t *testing.T) {
	b, s := jobruntest.NewBed(t, ""), jobruntest.NewSlurm("gpu001")
	var before []events.Event
	s.OnDrain = func() { before = b.ReadEvents(t) }
	r := runProlog(t, b, s, jobruntest.Env("prolog_slurmd"), "--simulate", "dgxh100", "--inject", "gpu3:xid=79")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", r.code, r.out, r.stderr)
	}
	if calls := s.Calls(); strings.Join(calls, "|") != "get|list|drain "+xid79+"|list" {
		t.Errorf("calls %q", calls)
	}
	if len(before) != 0 {
		t.Errorf("events written before the drain: %s", jobruntest.Kinds(before))
	}
	if n := s.Current(); !n.Drained() || n.Reason != xid79 {
		t.Errorf("node %+v", n)
	}
	evs := b.ReadEvents(t)
	if jobruntest.Kinds(evs) != "transition,drain,prolog" {
		t.Fatalf("events %s", jobruntest.Kinds(evs))
	}
	for _, ev := range evs {
		if ev.JobID != "4242" || ev.By != "prolog" {
			t.Errorf("event without the job: %+v", ev)
		}
	}
	if !strings.Contains(r.out, "exit 1: slurmd requeues job 4242") {
		t.Errorf("output:\n%s", r.out)
	}
}

func TestPrologExitCodes(t *testing.T) {
	tests := []struct {
		name    string
		extra   string
		setup   func(*jobruntest.Slurm)
		env     func(string) string
		args    []string
		want    int
		wantOut string
	}{
		{name: "drain impossible (Slurm unreachable): still 1, the job must not start",
			setup: func(s *jobruntest.Slurm) { s.DrainErr = errors.New("slurmctld unreachable") },
			env:   jobruntest.Env("prolog_slurmd"), args: []string{"--simulate", "dgxh100", "--inject", "gpu3:xid=79"},
			want: 1, wantOut: "policy: error"},
		{name: "storm guard refuses: 0, or slurmd would drain the fleet",
			extra: "[policy]\nmax_drained_nodes = 1\nmax_drained_fraction = 0.0\n",
			setup: func(s *jobruntest.Slurm) {
				s.Others = []slurm.Node{{Name: "gpu002", State: []string{"IDLE", "DRAIN"}, Reason: "gpuhc: gpu.xid: gpu0: XID 79"}}
			},
			env: jobruntest.Env("prolog_slurmd"), args: []string{"--simulate", "dgxh100", "--inject", "gpu3:xid=79"},
			want: 0, wantOut: "drain refused by the storm guard: exit 0"},
		{name: "WARN exits 0", env: jobruntest.Env("prolog_slurmd"),
			args: []string{"--simulate", "dgxh100", "--inject", "gpu3:correctable=5000"}, want: 0, wantOut: "gpu001: WARN"},
		{name: "ERROR (could not check; a hang within the budget) exits 0", extra: "[prolog]\nbudget = \"2s\"\n",
			env: jobruntest.Env("prolog_slurmd"), args: []string{"--simulate", "dgxh100", "--inject", "gpu2:hang=late"},
			want: 0, wantOut: "gpu001: ERROR"},
		{name: "configuration error under slurmd: 0, node left alone",
			extra: "[prolog]\nchecks = [\"gpu.cuont\"]\n", env: jobruntest.Env("prolog_slurmd"), want: 0},
		{name: "configuration error by hand: 2",
			extra: "[prolog]\nchecks = [\"gpu.cuont\"]\n", env: jobruntest.Env("", "SLURM_JOB_ID", ""), want: 2},
		{name: "bad flag under slurmd: 0", env: jobruntest.Env("prolog_slurmd"), args: []string{"--bogus"}, want: 0},
		{name: "bad --mode by hand: 2", env: jobruntest.Env("", "SLURM_JOB_ID", ""), args: []string{"--mode", "deep"}, want: 2},
		{name: "dry run: would exit 1, exits 0", env: jobruntest.Env("prolog_slurmd"),
			args: []string{"--dry-run", "--simulate", "dgxh100", "--inject", "gpu3:xid=79"}, want: 0, wantOut: "dry run: would exit 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, s := jobruntest.NewBed(t, tt.extra), jobruntest.NewSlurm("gpu001")
			if tt.setup != nil {
				tt.setup(s)
			}
			r := runProlog(t, b, s, tt.env, tt.args...)
			if r.code != tt.want || !strings.Contains(r.out, tt.wantOut) {
				t.Errorf("exit %d, want %d; output wants %q:\n%s%s", r.code, tt.want, tt.wantOut, r.out, r.stderr)
			}
		})
	}
}

// The prolog never resumes, leaves the health check's count of healthy
// runs alone, and keeps the statuses of checks it did not run.
func TestPrologNeverResumes(t *testing.T) {
	b, s := jobruntest.NewBed(t, ""), jobruntest.NewSlurm("gpu001")
	reason := "gpuhc: host.mounts: /scratch: not mounted"
	n := s.Current()
	n.State, n.Reason = []string{"IDLE", "DRAIN"}, reason
	s.SetNode(n)
	store := policy.NewStore(b.State, "gpu001")
	prev := policy.State{Drained: &policy.Drain{Reason: reason, At: time.Now(), By: policy.By}, HealthyRuns: 1,
		Last: map[string]check.Status{"host.mounts//scratch": check.Fail}}
	if err := store.Save(prev); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if r := runProlog(t, b, s, jobruntest.Env("prolog_slurmd"), "--simulate", "dgxh100"); r.code != 0 {
			t.Fatalf("run %d: exit %d\n%s", i, r.code, r.out)
		}
	}
	if len(s.Calls()) != 0 {
		t.Errorf("calls %q", s.Calls())
	}
	st, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	if st.Drained == nil || st.Drained.Reason != reason || st.HealthyRuns != 1 {
		t.Errorf("the health check's record changed: %+v", st)
	}
	if st.Last["host.mounts//scratch"] != check.Fail || st.Last["gpu.count/host"] != check.OK {
		t.Errorf("statuses: %v", st.Last)
	}
}

// [prolog] checks picks what runs; a disabled check is reported as not
// run, never an error.
func TestPrologCheckSelection(t *testing.T) {
	b := jobruntest.NewBed(t, "[prolog]\nchecks = [\"gpu.count\", \"host.mounts\", \"gpu.memory\"]\n[checks.mounts]\nenabled = false\n")
	s := jobruntest.NewSlurm("gpu001")
	r := runProlog(t, b, s, jobruntest.Env("prolog_slurmd"), "--simulate", "dgxh100", "--inject", "gpu3:xid=79")
	if r.code != 0 {
		t.Fatalf("gpu.xid is not selected, yet exit %d\n%s", r.code, r.out)
	}
	var checks []string
	last := ""
	for _, line := range strings.Split(r.out, "\n") {
		if f := strings.Fields(line); len(f) > 2 && strings.Contains(f[0], ".") && f[0] != last {
			checks, last = append(checks, f[0]+":"+f[2]), f[0]
		}
	}
	if strings.Join(checks, " ") != "gpu.count:OK gpu.memory:OK host.mounts:SKIP" {
		t.Errorf("checks %q\n%s", checks, r.out)
	}
}

// Full mode by partition; a bad SPANK value runs quick with a warning.
func TestPrologMode(t *testing.T) {
	b := jobruntest.NewBed(t, "[prolog]\nfull_partitions = [\"acceptance\"]\n")
	for _, tt := range []struct {
		env     func(string) string
		want    string
		warning string
	}{
		{jobruntest.Env("prolog_slurmd", "SLURM_JOB_PARTITION", "acceptance"), "full", ""},
		{jobruntest.Env("prolog_slurmd"), "quick", ""},
		{jobruntest.Env("prolog_slurmd", "SPANK_GPUHC_MODE", "ful"), "quick", `SPANK_GPUHC_MODE=\"ful\" is neither quick nor full`},
	} {
		s := jobruntest.NewSlurm("gpu001")
		r := runProlog(t, b, s, tt.env, "--simulate", "dgxh100")
		if r.code != 0 || !strings.Contains(r.out, "mode "+tt.want) || !strings.Contains(r.stderr, tt.warning) {
			t.Errorf("want mode %s, warning %q:\n%s%s", tt.want, tt.warning, r.out, r.stderr)
		}
	}
}

// A dry run checks, and changes nothing: no call, no event, no state, no
// job record.
func TestPrologDryRunChangesNothing(t *testing.T) {
	b, s := jobruntest.NewBed(t, ""), jobruntest.NewSlurm("gpu001")
	r := runProlog(t, b, s, jobruntest.Env("prolog_slurmd"), "--dry-run", "--simulate", "dgxh100", "--inject", "gpu3:xid=79")
	if r.code != 0 || !strings.Contains(r.out, "policy (dry run): would-drain: "+xid79) {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.stderr)
	}
	if len(s.Calls()) != 0 {
		t.Errorf("calls %q", s.Calls())
	}
	for _, p := range []string{b.State, b.Events, b.Lock} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after a dry run", p)
		}
	}
}

// Without the health check's lock the prolog still drains, but writes
// nothing to the state directory.
func TestPrologWithoutTheLock(t *testing.T) {
	b, s := jobruntest.NewBed(t, "[prolog]\nlock_wait = \"100ms\"\n"), jobruntest.NewSlurm("gpu001")
	l, err := lock.Try(b.Lock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	start := time.Now()
	r := runProlog(t, b, s, jobruntest.Env("prolog_slurmd"), "--simulate", "dgxh100", "--inject", "gpu3:xid=79")
	if r.code != 1 || !strings.Contains(r.stderr, "checking with the state directory read-only") {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.stderr)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %s", took)
	}
	if n := s.Current(); n.Reason != xid79 {
		t.Errorf("not drained: %+v", n)
	}
	for _, f := range []string{"simulated/gpu-xid.json", "simulated/kmsg-cursor.json", "policy.gpu001.json"} {
		if _, err := os.Stat(filepath.Join(b.State, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s written without the lock", f)
		}
	}
	// The job's own record is no shared state: it is kept.
	if _, err := (jobrecord.Store{Dir: jobrecord.Dir(filepath.Join(b.State, "simulated"))}).Load("4242"); err != nil {
		t.Errorf("job record: %v", err)
	}
}
