package epilog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/healthcheck"
	"github.com/gpuhc/gpuhc/internal/jobrecord"
	"github.com/gpuhc/gpuhc/internal/jobrun/jobruntest"
	"github.com/gpuhc/gpuhc/internal/prolog"
	"github.com/gpuhc/gpuhc/internal/runenv"
)

type outcome struct {
	code        int
	out, stderr string
}

func runEpilog(t *testing.T, b jobruntest.Bed, s *jobruntest.Slurm, k Killer, getenv func(string) string, args ...string) outcome {
	t.Helper()
	var out, errb bytes.Buffer
	code := Program{
		Process: runenv.Process{
			Args: append([]string{"--config", b.Config}, args...), Getenv: getenv,
			Hostname: func() (string, error) { return "", errors.New("no host name in tests") },
			Stdout:   &out, Stderr: &errb, Exit: func(c int) { t.Fatalf("watchdog fired with %d", c) },
		},
		Controller: s.Controller, Kill: k,
	}.Main()
	return outcome{code, out.String(), errb.String()}
}

func runProlog(t *testing.T, b jobruntest.Bed, s *jobruntest.Slurm, args ...string) {
	t.Helper()
	var out bytes.Buffer
	code := prolog.Program{
		Process: runenv.Process{
			Args: append([]string{"--config", b.Config}, args...), Getenv: jobruntest.Env("prolog_slurmd"),
			Hostname: func() (string, error) { return "", errors.New("no host name") },
			Stdout:   &out, Stderr: &out, Exit: func(c int) { t.Fatalf("watchdog fired with %d", c) },
		},
		Controller: s.Controller,
	}.Main()
	if code != 0 {
		t.Fatalf("prolog exit %d\n%s", code, out.String())
	}
}

func runHealthcheck(t *testing.T, b jobruntest.Bed, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	healthcheck.Program{Process: runenv.Process{
		Args: append([]string{"--config", b.Config}, args...), Getenv: func(k string) string { return map[string]string{"SLURMD_NODENAME": "gpu001"}[k] },
		Hostname: func() (string, error) { return "", errors.New("no host name") },
		Stdout:   &out, Stderr: &out, Exit: func(c int) { t.Fatalf("watchdog fired with %d", c) },
	}}.Main()
	return out.String()
}

func byKind(evs []events.Event, kind string) []events.Event {
	var out []events.Event
	for _, ev := range evs {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func records(t *testing.T, b jobruntest.Bed) jobrecord.Store {
	return jobrecord.Store{Dir: jobrecord.Dir(filepath.Join(b.State, "simulated"))}
}

// After a healthy job: all OK, no Slurm call, an epilog event, and the
// job's record gone.
func TestHealthyEpilog(t *testing.T) {
	b, s := jobruntest.NewBed(t, ""), jobruntest.NewSlurm("gpu001")
	runProlog(t, b, s, "--simulate", "dgxh100")
	r := runEpilog(t, b, s, nil, jobruntest.Env("epilog_slurmd"), "--simulate", "dgxh100")
	if r.code != 0 || len(s.Calls()) != 0 || !strings.Contains(r.out, "gpu001: OK:") ||
		!strings.Contains(r.out, "job 4242: no XID and no memory error during the job") {
		t.Fatalf("exit %d calls %q\n%s%s", r.code, s.Calls(), r.out, r.stderr)
	}
	evs := b.ReadEvents(t)
	if jobruntest.Kinds(evs) != "prolog,epilog" || evs[1].JobID != "4242" || evs[1].Status != "OK" {
		t.Errorf("events %+v", evs)
	}
	if _, err := records(t, b).Load("4242"); !errors.Is(err, jobrecord.ErrNoRecord) {
		t.Errorf("job record left: %v", err)
	}
}

// An XID during the job is the job's, even when a health check run read
// it (and moved the kernel-log cursor past it) before the epilog ran.
func TestXIDAttributedAcrossAHealthCheckRun(t *testing.T) {
	b, s := jobruntest.NewBed(t, "[checks.thermal]\nenabled = false\n"), jobruntest.NewSlurm("gpu001")
	runProlog(t, b, s, "--simulate", "dgxh100")
	hc := runHealthcheck(t, b, "--simulate", "dgxh100", "--inject", "gpu3:xid=79")
	if !strings.Contains(hc, "XID 79 GPU has fallen off the bus") {
		t.Fatalf("the health check did not read the XID:\n%s", hc)
	}
	r := runEpilog(t, b, s, nil, jobruntest.Env("epilog_slurmd"), "--simulate", "dgxh100", "--inject", "gpu3:xid=79")
	if r.code != 1 {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.stderr)
	}
	xids := byKind(b.ReadEvents(t), events.KindJobXID)
	if len(xids) != 1 {
		t.Fatalf("job-xid events %+v", xids)
	}
	x := xids[0]
	if x.JobID != "4242" || x.XID != 79 || x.Component != "gpu3" || x.Serial != "1654922000003" || x.Status != "FAIL" ||
		x.Message != "XID 79 GPU has fallen off the bus during job 4242 [simulated]" {
		t.Errorf("event %+v", x)
	}
	// gpu.xid's sticky FAIL still drains, with our reason first.
	want := "gpuhc: gpu.xid: gpu3 (SN 1654922000003, 0000:5d:00.0): XID 79 GPU has fallen off the bus [simulated]"
	if calls := s.Calls(); strings.Join(calls, "|") != "get|list|drain "+want+"|list" {
		t.Errorf("calls %q", calls)
	}
}

// Memory errors during the job are the job's too.
func TestMemoryErrorsAttributed(t *testing.T) {
	b, s := jobruntest.NewBed(t, "[epilog]\nfail_exit = 0\n"), jobruntest.NewSlurm("gpu001")
	runProlog(t, b, s, "--simulate", "dgxh100")
	r := runEpilog(t, b, s, nil, jobruntest.Env("epilog_slurmd"), "--simulate", "dgxh100", "--inject", "gpu1:remap-pending,gpu1:correctable=3")
	if r.code != 0 {
		t.Fatalf("fail_exit 0: exit %d\n%s", r.code, r.out)
	}
	var got []string
	for _, ev := range byKind(b.ReadEvents(t), events.KindJobMemory) {
		got = append(got, ev.Component+" "+ev.Status+" "+ev.Message+" "+ev.JobID)
	}
	want := []string{
		"gpu1 WARN volatile corrected ECC 0 -> 3 during job 4242 [simulated] 4242",
		"gpu1 FAIL uncorrectable remapped rows 0 -> 1 during job 4242 [simulated] 4242",
		"gpu1 FAIL row remap pending during job 4242 [simulated] 4242",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("job-memory events\n got %q\nwant %q", got, want)
	}
	// gpu.memory's FAIL drained the node before the exit.
	if n := s.Current(); !n.Drained() || !strings.HasPrefix(n.Reason, "gpuhc: gpu.memory: gpu1") {
		t.Errorf("node %+v", n)
	}
}

// A leftover process with leftover = "drain": our reason first, then the
// exit status fail_exit (1), so slurmd's "Epilog error" never replaces it.
func TestLeftoverDrainsThenExits(t *testing.T) {
	b, s := jobruntest.NewBed(t, "[epilog]\nleftover = \"drain\"\n"), jobruntest.NewSlurm("gpu001")
	b.WriteProc(t, 4242, 1001, "python3", fmt.Sprintf(v2Job, "4242"), "")
	var evsAtDrain []events.Event
	s.OnDrain = func() { evsAtDrain = b.ReadEvents(t) }
	r := runEpilog(t, b, s, nil, jobruntest.Env("epilog_slurmd", "SLURM_JOB_GPUS", "2"), "--simulate", "dgxh100", "--inject", "gpu2:leftover=4242/2048")
	want := "gpuhc: job.leftover: gpu2 (SN 1654922000002, 0000:3a:00.0): pid 4242 (python3, uid 1001) holds 2048 MiB after job 4242 [simulated]"
	if r.code != 1 || strings.Join(s.Calls(), "|") != "get|list|drain "+want+"|list" {
		t.Fatalf("exit %d calls %q\n%s%s", r.code, s.Calls(), r.out, r.stderr)
	}
	if len(evsAtDrain) != 0 {
		t.Errorf("events before the drain: %s", jobruntest.Kinds(evsAtDrain))
	}
	left := byKind(b.ReadEvents(t), events.KindJobLeftover)
	if len(left) != 1 || left[0].JobID != "4242" || left[0].Status != "FAIL" || left[0].Component != "gpu2" {
		t.Errorf("job-leftover events %+v", left)
	}
	// No prolog record: said, and not an error.
	if !strings.Contains(r.out, "job 4242: no prolog record") {
		t.Errorf("output:\n%s", r.out)
	}
}

// A dry run: checks, says what it would do, and changes nothing: no
// call, no event, the job's record kept.
func TestEpilogDryRunChangesNothing(t *testing.T) {
	b, s := jobruntest.NewBed(t, "[epilog]\nleftover = \"kill\"\n"), jobruntest.NewSlurm("gpu001")
	runProlog(t, b, s, "--simulate", "dgxh100")
	before, err := os.ReadFile(b.Events)
	if err != nil {
		t.Fatal(err)
	}
	b.WriteProc(t, 4242, 1001, "python3", "", "SLURM_JOB_ID=4242\x00")
	k := &fakeKiller{}
	r := runEpilog(t, b, s, k, jobruntest.Env("epilog_slurmd"), "--dry-run", "--simulate", "dgxh100", "--inject", "gpu3:xid=79,gpu2:leftover=4242")
	if r.code != 0 || !strings.Contains(r.out, "policy (dry run): would-drain") || !strings.Contains(r.out, "would kill pid 4242") ||
		!strings.Contains(r.out, "dry run: would exit 1") {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.stderr)
	}
	if len(s.Calls()) != 0 || len(k.calls) != 0 {
		t.Errorf("calls %q kills %q", s.Calls(), k.calls)
	}
	after, _ := os.ReadFile(b.Events)
	if !bytes.Equal(before, after) {
		t.Errorf("events written:\n%s", after[len(before):])
	}
	if _, err := records(t, b).Load("4242"); err != nil {
		t.Errorf("job record: %v", err)
	}
}

// Exit codes: fail_exit 0 or 1 after a FAIL; 0 for configuration errors
// under slurmd.
func TestEpilogExitCodes(t *testing.T) {
	for _, tt := range []struct {
		name  string
		extra string
		args  []string
		want  int
	}{
		{"FAIL, fail_exit 1", "", []string{"--simulate", "dgxh100", "--inject", "gpu0:dbe=1"}, 1},
		{"FAIL, fail_exit 0", "[epilog]\nfail_exit = 0\n", []string{"--simulate", "dgxh100", "--inject", "gpu0:dbe=1"}, 0},
		{"WARN", "", []string{"--simulate", "dgxh100", "--inject", "gpu0:correctable=5000"}, 0},
		{"configuration error", "[epilog]\nleftover = \"nuke\"\n", nil, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, s := jobruntest.NewBed(t, tt.extra), jobruntest.NewSlurm("gpu001")
			if r := runEpilog(t, b, s, nil, jobruntest.Env("epilog_slurmd"), tt.args...); r.code != tt.want {
				t.Errorf("exit %d, want %d\n%s%s", r.code, tt.want, r.out, r.stderr)
			}
		})
	}
}

// Review: [policy] drain_on_error, meant for the health check, made the
// prolog drain the node and requeue the job for an NVML answer slower
// than its budget, which the job runs soften to ERROR. Neither the prolog
// nor the epilog drains for an ERROR.
func TestJobRunsDoNotDrainOnError(t *testing.T) {
	b, s := jobruntest.NewBed(t, "[policy]\ndrain_on_error = true\n[prolog]\nbudget = \"2s\"\n[epilog]\nbudget = \"2s\"\nkill_grace = \"1s\"\n"), jobruntest.NewSlurm("gpu001")
	runProlog(t, b, s, "--simulate", "dgxh100", "--inject", "gpu3:hang")
	r := runEpilog(t, b, s, nil, jobruntest.Env("epilog_slurmd"), "--simulate", "dgxh100", "--inject", "gpu3:hang")
	if r.code != 0 || !strings.Contains(r.out, "gpu001: ERROR") {
		t.Errorf("epilog exit %d\n%s%s", r.code, r.out, r.stderr)
	}
	if len(s.Calls()) != 0 || s.Current().Drained() {
		t.Errorf("calls %q, node %+v", s.Calls(), s.Current())
	}
}

// The epilog judges a job's XIDs as gpu.xid does, by NVIDIA's catalogue
// with its decodes: an NVLink5 Nonfatal 145 (IGNORE) is OK, an XID 154
// naming "Node Reboot Required" a FAIL whose action is reboot.
func TestJobXIDsDecoded(t *testing.T) {
	b, s := jobruntest.NewBed(t, "[checks.thermal]\nenabled = false\n"), jobruntest.NewSlurm("gpu001")
	runProlog(t, b, s, "--simulate", "dgxb200")
	runEpilog(t, b, s, nil, jobruntest.Env("epilog_slurmd"), "--simulate", "dgxb200", "--inject", "gpu1:xid=145,gpu2:xid=154")
	got := map[int]events.Event{}
	for _, e := range byKind(b.ReadEvents(t), events.KindJobXID) {
		got[e.XID] = e
	}
	if e := got[145]; e.Status != "OK" || e.Action != "" {
		t.Errorf("XID 145 Nonfatal: %+v, want OK", e)
	}
	if e := got[154]; e.Status != "FAIL" || e.Action != "reboot" || !strings.Contains(e.Message, "Node Reboot Required") {
		t.Errorf("XID 154: %+v, want FAIL reboot naming the recovery action", e)
	}
}
