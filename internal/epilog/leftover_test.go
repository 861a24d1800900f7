package epilog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/jobenv"
)

// fakeKiller records kills and answers as told: outcome for every
// process, byPID where set.
type fakeKiller struct {
	calls   []string
	outcome KillOutcome
	byPID   map[int]KillOutcome
	// onKill runs before Kill answers (the processes end, in the sim).
	onKill func()
}

func (k *fakeKiller) Kill(_ context.Context, procs []Proc, grace, wait time.Duration) []KillOutcome {
	var pids []string
	out := make([]KillOutcome, len(procs))
	for i, p := range procs {
		pids = append(pids, fmt.Sprint(p.PID))
		out[i] = k.outcome
		if o, ok := k.byPID[p.PID]; ok {
			out[i] = o
		}
	}
	k.calls = append(k.calls, fmt.Sprintf("kill %s grace %s wait %s", strings.Join(pids, ","), grace, wait.Round(100*time.Millisecond)))
	if k.onKill != nil {
		k.onKill()
	}
	return out
}

// proc is a fixture process: /proc/<pid>/{status,cgroup,environ}, and
// stat when start is set.
type proc struct {
	pid     int
	uids    [4]int
	comm    string
	cgroup  string
	environ string
	start   uint64
	garbage bool // an unparsable status
}

func writeProcs(t *testing.T, root string, ps []proc) {
	t.Helper()
	for _, p := range ps {
		dir := filepath.Join(root, "proc", fmt.Sprint(p.pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		status := fmt.Sprintf("Name:\t%s\nPid:\t%d\nUid:\t%d\t%d\t%d\t%d\n", p.comm, p.pid, p.uids[0], p.uids[1], p.uids[2], p.uids[3])
		if p.garbage {
			status = "Name:\tx\nUid:\tminus one\n"
		}
		files := map[string]string{"status": status, "cgroup": p.cgroup, "environ": p.environ}
		if p.start != 0 {
			files["stat"] = statLine(p.pid, p.comm, 'S', p.start)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// statLine is /proc/<pid>/stat with the state and the start time (field
// 22) set, the other numbers 0.
func statLine(pid int, comm string, state byte, start uint64) string {
	return fmt.Sprintf("%d (%s) %c %s%d 0 0\n", pid, comm, state, strings.Repeat("0 ", 18), start)
}

func user(pid, uid int, comm string) proc {
	return proc{pid: pid, uids: [4]int{uid, uid, uid, uid}, comm: comm}
}

// mine is a process of job 4242's user that its cgroup (v2) names.
func mine(pid int, comm string) proc {
	p := user(pid, jobUID, comm)
	p.cgroup = fmt.Sprintf(v2Job, "4242")
	return p
}

const (
	jobUID = 1001
	v1Job  = "12:devices:/slurm/uid_1001/job_%s/step_0\n0::/slurm/uid_1001/job_%s/step_0/task_0\n"
	v2Job  = "0::/system.slice/slurmstepd.scope/job_%s/step_0/user/task_0\n"
	// noJob is a session's cgroup: a process started over ssh.
	noJob = "0::/user.slice/user-1001.slice/session-7.scope\n"
)

func TestLeftover(t *testing.T) {
	gone := func(m *sim.Machine, gpus ...int) func() {
		return func() {
			for _, i := range gpus {
				m.Devices[i].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
			}
		}
	}
	tests := []struct {
		name   string
		inject []string
		procs  []proc
		mode   string
		memMiB int
		uid    int // the job's uid; jobUID when 0, root when -2
		// env overrides the job's environment ("" unsets): by default
		// SLURM_JOB_ID=4242, SLURM_JOB_UID=1001, SLURM_JOB_GPUS=gpus.
		env    []string
		gpus   string
		budget time.Duration // the check's time; 30s when 0
		noKill bool          // no killer (dry run, simulation)
		killer fakeKiller
		// setup changes the machine, or the killer, before the run.
		setup func(m *sim.Machine, k *fakeKiller)
		// want is "gpuN STATUS action message-part" for every result
		// that is not an OK "no process" line.
		want      []string
		wantKills []string // prefixes
		results   int      // how many results; 8 when 0
	}{
		{name: "healthy: nothing left", mode: config.LeftoverKill, gpus: "2,3"},
		{name: "report: the job's process", inject: []string{"gpu2:leftover=4242/2048"}, procs: []proc{mine(4242, "python3")}, gpus: "2",
			mode: config.LeftoverReport, want: []string{"gpu2 WARN none pid 4242 (python3, uid 1001) holds 2048 MiB after job 4242 [simulated]"}},
		{name: "drain: the job's process", inject: []string{"gpu2:leftover=4242"}, procs: []proc{mine(4242, "python3")}, gpus: "2",
			mode: config.LeftoverDrain, want: []string{"gpu2 FAIL drain pid 4242 (python3, uid 1001) holds 1024 MiB after job 4242"}},
		{name: "drain: two of the job's processes, named by its cgroup v1 and by SLURM_JOB_ID", inject: []string{"gpu2:leftover=4242", "gpu2:leftover=4343"},
			procs: []proc{{pid: 4242, uids: [4]int{jobUID, jobUID, jobUID, jobUID}, comm: "python3", cgroup: fmt.Sprintf(v1Job, "4242", "4242")},
				{pid: 4343, uids: [4]int{jobUID, jobUID, jobUID, jobUID}, comm: "torchrun", cgroup: noJob, environ: "HOME=/home/a\x00SLURM_JOB_ID=4242\x00"}},
			mode: config.LeftoverDrain, gpus: "2", want: []string{"gpu2 FAIL drain pid 4242 (python3, uid 1001) holds 1024 MiB (+1 more) after job 4242"}},
		{name: "kill: the job's process is killed", inject: []string{"gpu2:leftover=4242"}, procs: []proc{mine(4242, "python3")},
			mode: config.LeftoverKill, gpus: "2", want: []string{"gpu2 WARN none killed pid 4242 (python3, uid 1001) holds 1024 MiB left by job 4242"},
			wantKills: []string{"kill 4242 grace 2s wait 3s"}},
		{name: "kill: the job's processes on several GPUs are signalled together, once each",
			inject: []string{"gpu2:leftover=4242", "gpu3:leftover=4343", "gpu3:leftover=4242"}, procs: []proc{mine(4242, "python3"), mine(4343, "python3")},
			mode: config.LeftoverKill, gpus: "2,3",
			want: []string{"gpu2 WARN none killed pid 4242 (python3, uid 1001) holds 1024 MiB left by job 4242",
				"gpu3 WARN none killed pid 4242 (python3, uid 1001) holds 1024 MiB (+1 more) left by job 4242"},
			wantKills: []string{"kill 4242,4343 grace 2s wait 3s"}},
		{name: "kill: still there a full wait after SIGKILL, in D state", inject: []string{"gpu2:leftover=4242"}, procs: []proc{mine(4242, "python3")},
			mode: config.LeftoverKill, gpus: "2", killer: fakeKiller{outcome: KillOutcome{Result: KillAlive, AfterKill: 3 * time.Second, State: 'D'}},
			want:      []string{"gpu2 FAIL drain pid 4242 (python3, uid 1001) holds 1024 MiB after job 4242: still there 3s after SIGKILL (state D: stuck in the kernel)"},
			wantKills: []string{"kill 4242 grace 2s wait 3s"}},
		{name: "kill: the deadline leaves SIGKILL less than its wait: SIGTERM's grace is cut, not SIGKILL's, and not gone yet is a WARN",
			inject: []string{"gpu2:leftover=4242"}, procs: []proc{mine(4242, "python3")}, budget: 3 * time.Second,
			mode: config.LeftoverKill, gpus: "2", killer: fakeKiller{outcome: KillOutcome{Result: KillAlive, AfterKill: 1700 * time.Millisecond}},
			want:      []string{"gpu2 WARN none pid 4242 (python3, uid 1001) holds 1024 MiB after job 4242: SIGKILL sent, not gone after 1.7s"},
			wantKills: []string{"kill 4242 grace 0s wait 1."}},
		{name: "kill: the time runs out in the kills: said so, and NVML is not blamed", inject: []string{"gpu2:leftover=4242"},
			procs: []proc{mine(4242, "python3")}, mode: config.LeftoverKill, gpus: "2,3", budget: 2 * time.Second,
			setup: func(m *sim.Machine, k *fakeKiller) {
				k.onKill = func() { gone(m, 2)(); time.Sleep(2 * time.Second) }
			},
			want: []string{"gpu2 WARN none killed pid 4242 (python3, uid 1001) holds 1024 MiB left by job 4242; memory not read: the check's time ran out after the kills",
				"gpu3 ERROR none no process of job 4242 left; memory not read: the check's time ran out after the kills"},
			wantKills: []string{"kill 4242 grace 0s wait "}},
		{name: "kill: the pid names another process since it was judged", inject: []string{"gpu2:leftover=4242"}, procs: []proc{mine(4242, "python3")},
			mode: config.LeftoverKill, gpus: "2", killer: fakeKiller{outcome: KillOutcome{Result: KillChanged, Err: errors.New("started at tick 9, judged 5: pid reused")}},
			want:      []string{"gpu2 WARN none pid 4242 changed since judged (started at tick 9, judged 5: pid reused), not signalled"},
			wantKills: []string{"kill 4242 grace 2s wait 3s"}},
		{name: "kill: a process that cannot be signalled is could-not-check, not still there", inject: []string{"gpu2:leftover=4242"},
			procs: []proc{mine(4242, "python3")}, mode: config.LeftoverKill, gpus: "2",
			killer:    fakeKiller{outcome: KillOutcome{Result: KillError, Err: errors.New("pidfd_open: operation not permitted")}},
			want:      []string{"gpu2 ERROR none could not signal pid 4242: pidfd_open: operation not permitted"},
			wantKills: []string{"kill 4242 grace 2s wait 3s"}},
		{name: "kill in a dry run or simulation: would kill", inject: []string{"gpu2:leftover=4242"}, procs: []proc{mine(4242, "python3")},
			mode: config.LeftoverKill, gpus: "2", noKill: true, want: []string{"gpu2 WARN none would kill pid 4242 (python3, uid 1001)"}},
		{name: "root's process (a daemon) is not the job's", inject: []string{"gpu2:leftover=900"}, procs: []proc{user(900, 0, "nv-hostengine")},
			mode: config.LeftoverKill, gpus: "2", memMiB: -1},
		{name: "another user's process is not judged, nor the memory under it", inject: []string{"gpu2:leftover=5000/4096"},
			procs: []proc{user(5000, 1002, "python3")}, mode: config.LeftoverKill, gpus: "2"},
		{name: "the same user's other job is not this job's", inject: []string{"gpu2:leftover=5000"},
			procs: []proc{{pid: 5000, uids: [4]int{jobUID, jobUID, jobUID, jobUID}, comm: "python3", cgroup: fmt.Sprintf(v1Job, "999", "999")}},
			mode:  config.LeftoverKill, gpus: "2"},
		// Review R1: job 4242 had GPU 2; the same user's process naming
		// no job holds GPU 5 (another job's, started over ssh).
		{name: "the same user's process naming no job, on a GPU not the job's: not judged, not killed", inject: []string{"gpu5:leftover=5000/40000"},
			procs: []proc{{pid: 5000, uids: [4]int{jobUID, jobUID, jobUID, jobUID}, comm: "python3", cgroup: noJob, environ: "HOME=/home/u\x00"}},
			mode:  config.LeftoverKill, gpus: "2", env: []string{"CUDA_VISIBLE_DEVICES", "2"}},
		{name: "the same user's process naming no job, on the job's GPU: reported, never killed, memory not judged",
			inject: []string{"gpu2:leftover=5000/40000", "gpu2:memused=8000"}, procs: []proc{user(5000, jobUID, "python3")},
			mode: config.LeftoverKill, gpus: "2",
			want: []string{"gpu2 WARN none pid 5000 (python3, uid 1001) holds 40000 MiB, the job user's but naming no job (maybe not job 4242's): reported, not killed"}},
		{name: "the same user's process naming no job, in drain mode: reported, not drained", inject: []string{"gpu2:leftover=5000"},
			procs: []proc{user(5000, jobUID, "python3")}, mode: config.LeftoverDrain, gpus: "2",
			want: []string{"gpu2 WARN none pid 5000 (python3, uid 1001) holds 1024 MiB, the job user's but naming no job"}},
		{name: "a job without GPUs: the same user's process naming no job is not judged", inject: []string{"gpu5:leftover=5000"},
			procs: []proc{user(5000, jobUID, "python3")}, mode: config.LeftoverKill},
		{name: "a job without GPUs: its own process is still killed, wherever it is", inject: []string{"gpu5:leftover=4242"},
			procs: []proc{mine(4242, "python3")}, mode: config.LeftoverKill,
			want:      []string{"gpu5 WARN none killed pid 4242 (python3, uid 1001) holds 1024 MiB left by job 4242"},
			wantKills: []string{"kill 4242 grace 2s wait 3s"}},
		{name: "a root job's process (cgroup says so) is reported, never killed", uid: -2, inject: []string{"gpu2:leftover=4242"},
			procs: []proc{{pid: 4242, comm: "python3", cgroup: fmt.Sprintf(v1Job, "4242", "4242")}},
			mode:  config.LeftoverKill, gpus: "2",
			want: []string{"gpu2 FAIL drain pid 4242 (python3, uid 0) holds 1024 MiB after job 4242: not killed"}},
		{name: "a setuid process of the job is never killed", inject: []string{"gpu2:leftover=4242"},
			procs: []proc{{pid: 4242, uids: [4]int{jobUID, 0, 0, 0}, comm: "sudo", cgroup: fmt.Sprintf(v2Job, "4242")}}, mode: config.LeftoverKill, gpus: "2",
			want: []string{"gpu2 FAIL drain pid 4242 (sudo, uid 1001) holds 1024 MiB after job 4242: not killed"}},
		{name: "a process gone since NVML listed it", inject: []string{"gpu2:leftover=4242"}, mode: config.LeftoverDrain, gpus: "2", memMiB: -1},
		{name: "an unreadable owner on the job's GPU is could-not-check", inject: []string{"gpu2:leftover=4242"}, procs: []proc{{pid: 4242, garbage: true}},
			mode: config.LeftoverDrain, gpus: "2", want: []string{"gpu2 ERROR none pid 4242: cannot tell whose it is"}},
		{name: "an unreadable owner on another GPU is not judged", inject: []string{"gpu5:leftover=4242"}, procs: []proc{{pid: 4242, garbage: true}},
			mode: config.LeftoverDrain, gpus: "2"},
		{name: "memory not released, report", inject: []string{"gpu2:memused=2048"}, mode: config.LeftoverReport, gpus: "2,3",
			want: []string{"gpu2 WARN none 2048 MiB in use after job 4242 > 1024, no process holds it"}},
		{name: "memory not released, drain", inject: []string{"gpu2:memused=2048"}, mode: config.LeftoverDrain, gpus: "2",
			want: []string{"gpu2 FAIL reset-gpu 2048 MiB in use after job 4242 > 1024"}},
		{name: "memory not released after a kill", inject: []string{"gpu2:leftover=4242/512", "gpu2:memused=2048"},
			procs: []proc{mine(4242, "python3")}, mode: config.LeftoverKill, gpus: "2",
			setup:     func(m *sim.Machine, k *fakeKiller) { k.onKill = gone(m, 2) },
			want:      []string{"gpu2 FAIL reset-gpu 2560 MiB in use after job 4242 > 1024"},
			wantKills: []string{"kill 4242 grace 2s wait 3s"}},
		{name: "memory after a kill, the killed process still listed: not judged", inject: []string{"gpu2:leftover=4242/512", "gpu2:memused=2048"},
			procs: []proc{mine(4242, "python3")}, mode: config.LeftoverKill, gpus: "2",
			want:      []string{"gpu2 WARN none killed pid 4242 (python3, uid 1001) holds 512 MiB left by job 4242; memory not judged: pid 4242 on the GPU after the read"},
			wantKills: []string{"kill 4242 grace 2s wait 3s"}},
		{name: "memory, and a process appears right after the read (another job starting): not judged", inject: []string{"gpu2:memused=30000"},
			mode: config.LeftoverDrain, gpus: "2",
			setup: func(m *sim.Machine, _ *fakeKiller) {
				n := 0
				m.Devices[2].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
					if n++; n == 1 {
						return nil, nvml.SUCCESS
					}
					return []nvml.ProcessInfo{{Pid: 7000, UsedGpuMemory: 30000 << 20}}, nvml.SUCCESS
				}
			}},
		{name: "memory under the threshold", inject: []string{"gpu2:memused=1000"}, mode: config.LeftoverDrain, gpus: "2"},
		{name: "memory threshold 0 does not judge", inject: []string{"gpu2:memused=8192"}, mode: config.LeftoverDrain, gpus: "2", memMiB: -1},
		{name: "memory of a GPU that is not the job's", inject: []string{"gpu5:memused=8192"}, mode: config.LeftoverDrain, gpus: "2"},
		// Review R4: a job without GPUs does not judge the memory of GPUs
		// other jobs use.
		{name: "a job without GPUs judges no GPU's memory", inject: []string{"gpu5:memused=30000"}, mode: config.LeftoverKill},
		{name: "the job's GPUs by UUID (CUDA_VISIBLE_DEVICES)", inject: []string{"gpu5:memused=30000", "gpu2:memused=30000"}, mode: config.LeftoverDrain,
			env:  []string{"CUDA_VISIBLE_DEVICES", "uuid:5"},
			want: []string{"gpu5 FAIL reset-gpu 30000 MiB in use after job 4242 > 1024"}},
		{name: "the job's GPUs unknown (a refused SLURM_JOB_GPUS): ERROR, and no memory judged", inject: []string{"gpu5:memused=30000"},
			mode: config.LeftoverKill, gpus: "5;rm", results: 9,
			want: []string{`host ERROR none cannot tell the job's GPUs (SLURM_JOB_GPUS="5;rm" is not a list of GPU indices): memory, and processes naming no job, not judged`}},
		{name: "by hand without a job: every GPU's memory", inject: []string{"gpu5:memused=30000"}, mode: config.LeftoverDrain,
			env:  []string{"SLURM_JOB_ID", ""},
			want: []string{"gpu5 FAIL reset-gpu 30000 MiB in use after the job > 1024"}},
		{name: "NVML hangs on a GPU: it FAILs (the job run softens it), the GPUs before it are judged without NVML, none after",
			inject: []string{"gpu3:hang=late"}, mode: config.LeftoverKill, gpus: "2", budget: 2 * time.Second, results: 4,
			want: []string{"gpu2 ERROR none no process of job 4242 left; memory not read: NVML did not answer", "gpu3 FAIL reboot NVML did not answer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := sim.Build("dgxh100", tt.inject)
			if err != nil {
				t.Fatal(err)
			}
			root := t.TempDir()
			writeProcs(t, root, tt.procs)
			env := map[string]string{"SLURM_JOB_ID": "4242", "SLURM_JOB_UID": fmt.Sprint(jobUID), "SLURM_JOB_GPUS": tt.gpus}
			if tt.uid == -2 {
				env["SLURM_JOB_UID"] = "0"
			}
			for i := 0; i+1 < len(tt.env); i += 2 {
				v := tt.env[i+1]
				if n, ok := strings.CutPrefix(v, "uuid:"); ok {
					var dev int
					fmt.Sscan(n, &dev)
					v, _ = m.Devices[dev].GetUUID()
				}
				env[tt.env[i]] = v
			}
			cfg := config.Default().Epilog
			cfg.Leftover = tt.mode
			switch {
			case tt.memMiB < 0:
				cfg.LeftoverMemoryMiB = 0
			case tt.memMiB > 0:
				cfg.LeftoverMemoryMiB = tt.memMiB
			}
			k := tt.killer
			if tt.setup != nil {
				tt.setup(m, &k)
			}
			c := &Leftover{
				Node: gpu.NewNode(m.Server, root, -1, "dgxh100", gpu.WithBus(m.OnBus)),
				Job:  jobenv.Parse(func(key string) string { return env[key] }), Cfg: cfg, Kill: &k,
				Proc: func(pid int) (Proc, error) { return ReadProc(root, pid) },
			}
			if tt.noKill {
				c.Kill = nil
			}
			budget := tt.budget
			if budget == 0 {
				budget = 30 * time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			defer cancel()
			results := c.Run(ctx)
			n := tt.results
			if n == 0 {
				n = 8
			}
			if len(results) != n {
				t.Fatalf("%d results, want %d: %+v", len(results), n, results)
			}
			var got []string
			for _, r := range results {
				if r.Status == check.OK && (strings.HasPrefix(r.Message, "no process") || strings.HasPrefix(r.Message, "nothing left")) {
					continue
				}
				got = append(got, fmt.Sprintf("%s %s %s %s", r.Component, r.Status, r.Action, r.Message))
			}
			if len(got) != len(tt.want) {
				t.Fatalf("results %q, want %q", got, tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("result %q, want it to start %q", got[i], tt.want[i])
				}
			}
			if len(k.calls) != len(tt.wantKills) {
				t.Fatalf("kills %q, want %q", k.calls, tt.wantKills)
			}
			for i := range k.calls {
				if !strings.HasPrefix(k.calls[i], tt.wantKills[i]) {
					t.Errorf("kill %q, want it to start %q", k.calls[i], tt.wantKills[i])
				}
			}
		})
	}
}

func TestLeftoverWithoutJobUID(t *testing.T) {
	m, _ := sim.New("dgxh100", nil)
	c := &Leftover{Node: gpu.NewNode(m.Server, "/", -1, "dgxh100"), Job: jobenv.Parse(func(string) string { return "" }),
		Cfg: config.Default().Epilog, Proc: func(int) (Proc, error) { return Proc{}, errGone }}
	r := c.Run(context.Background())
	if len(r) != 1 || r[0].Status != check.Skip || !strings.Contains(r[0].Message, "job uid unknown") {
		t.Errorf("%+v", r)
	}
}

func TestReadProc(t *testing.T) {
	root := t.TempDir()
	writeProcs(t, root, []proc{
		{pid: 10, uids: [4]int{1001, 1001, 1001, 1001}, comm: "python3", cgroup: fmt.Sprintf(v1Job, "77", "77"), start: 123456},
		{pid: 11, uids: [4]int{1001, 1001, 1001, 1001}, comm: "a.out", cgroup: "0::/user.slice\n", environ: "X=1\x00SLURM_JOB_ID=78\x00"},
		{pid: 12, uids: [4]int{1001, 1001, 1001, 1001}, comm: "sh", environ: "SLURM_JOB_ID=../../x\x00"},
		{pid: 13, garbage: true},
		{pid: 15, uids: [4]int{1001, 1001, 1001, 1001}, comm: "a) (b"},
		{pid: 16, uids: [4]int{1001, 1001, 1001, 1001}, comm: "x"},
		{pid: 17, uids: [4]int{1001, 1001, 1001, 1001}, comm: "x"},
	})
	// A command name with ") (" in it; a short stat; a start time that
	// is not a number.
	for pid, stat := range map[int]string{15: statLine(15, "a) (b", 'R', 99), 16: "16 (x) S 1 2 3\n", 17: strings.Replace(statLine(17, "x", 'S', 5), " 5 0 0", " -5 0 0", 1)} {
		if err := os.WriteFile(filepath.Join(root, "proc", fmt.Sprint(pid), "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		pid  int
		want string
		err  string
	}{
		{10, "python3 1001 job 77 start 123456", ""},
		{11, "a.out 1001 job 78 start 0", ""},
		{12, "sh 1001 job  start 0", ""},
		{13, "", "Uid line"},
		{14, "", "process gone"},
		{0, "", "not a process"},
		{15, "a) (b 1001 job  start 99", ""},
		{16, "", "want at least 20"},
		{17, "", "start time \"-5\" is not a positive number"},
	}
	for _, tt := range tests {
		p, err := ReadProc(root, tt.pid)
		got := fmt.Sprintf("%s %d job %s start %d", p.Comm, p.UID(), p.JobID, p.StartTime)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("pid %d: %v, want %q", tt.pid, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("pid %d: %q %v, want %q", tt.pid, got, err, tt.want)
		}
	}
}

// startAs starts /bin/sleep 60 as uid 4001 with env (root only), and
// returns it with a channel that gets its end.
func startAs(t *testing.T, env ...string) (*exec.Cmd, chan error) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to start a process as another user")
	}
	cmd := exec.Command("/bin/sleep", "60")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 4001, Gid: 4001}}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a process as uid 4001: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	waitEnviron(t, cmd.Process.Pid)
	return cmd, done
}

// waitEnviron waits until the kernel has set up pid's new environment:
// Start returns at exec's point of no return, when comm already reads
// "sleep" but /proc/PID/environ may still be empty (a CI run caught
// this). ReadProc judging such a process "naming no job" is the safe
// answer in production; a test needs the settled one.
func waitEnviron(t *testing.T, pid int) {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/environ", pid)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return
		}
	}
	t.Fatalf("%s stayed empty", path)
}

// alive fails the test if the process ended within a short while.
func alive(t *testing.T, done chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s: the process was killed: %v", what, err)
	case <-time.After(200 * time.Millisecond):
	}
}

// SysKiller refuses what it must never do, before any signal: each case
// is a real process (as judged) with one thing wrong.
func TestSysKillerRefuses(t *testing.T) {
	cmd, done := startAs(t, "SLURM_JOB_ID=4242")
	judged, err := ReadProc("/", cmd.Process.Pid)
	if err != nil || judged.JobID != "4242" || judged.StartTime == 0 || judged.UID() != 4001 {
		t.Fatalf("judged %+v %v", judged, err)
	}
	tests := []struct {
		name   string
		change func(p *Proc)
		result KillResult
		err    string
	}{
		{"pid 1", func(p *Proc) { p.PID = 1 }, KillError, "not a user process"},
		{"root's", func(p *Proc) { p.UIDs = [4]int{0, 0, 0, 0} }, KillError, "root's"},
		{"setuid", func(p *Proc) { p.UIDs[1] = 0 }, KillError, "root's, or not all one user's"},
		{"naming no job", func(p *Proc) { p.JobID = "" }, KillError, "no job id"},
		{"start time unknown", func(p *Proc) { p.StartTime = 0 }, KillError, "start time unknown"},
		// Review R2: the pid was judged job 4242's; it is now job 999's
		// process of the same user (pid reused, or moved).
		{"judged another job's", func(p *Proc) { p.JobID = "999" }, KillChanged, `job now "4242", judged "999"`},
		{"judged with another start time (pid reused)", func(p *Proc) { p.StartTime-- }, KillChanged, "pid reused"},
		{"judged with other uids", func(p *Proc) { p.UIDs = [4]int{4002, 4002, 4002, 4002} }, KillChanged, "uids now"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := judged
			tt.change(&p)
			out := (SysKiller{}).Kill(context.Background(), []Proc{p}, time.Second, time.Second)
			if len(out) != 1 || out[0].Result != tt.result || out[0].Err == nil || !strings.Contains(out[0].Err.Error(), tt.err) {
				t.Errorf("outcome %+v, want %d %q", out, tt.result, tt.err)
			}
			alive(t, done, tt.name)
		})
	}
}

// Review R2, as it happened: job 4242's epilog judged a pid that is now
// job 999's process of the same user. It is not signalled.
func TestSysKillerSparesAnotherJobOnTheSamePid(t *testing.T) {
	cmd, done := startAs(t, "SLURM_JOB_ID=999")
	p, err := ReadProc("/", cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	p.JobID = "4242" // what the judge saw a moment earlier
	c := &Leftover{Job: jobenv.Env{JobID: "4242", UID: 4001}, Cfg: config.Epilog{Leftover: config.LeftoverKill, KillGrace: config.Duration{Duration: time.Second}}, Kill: SysKiller{}}
	k := c.kill(context.Background(), []*survey{{ours: []held{{pid: p.PID, proc: p}}}})
	if o := k.out[p.PID]; o.Result != KillChanged {
		t.Errorf("outcome %+v, want changed", o)
	}
	alive(t, done, "job 999's process")
}

// A real process of the job: SIGTERM ends it.
func TestSysKillerKills(t *testing.T) {
	cmd, done := startAs(t, "SLURM_JOB_ID=4242")
	p, err := ReadProc("/", cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	out := (SysKiller{}).Kill(context.Background(), []Proc{p}, 2*time.Second, time.Second)
	if len(out) != 1 || out[0].Result != KillGone {
		t.Fatalf("outcome %+v", out)
	}
	select {
	case err := <-done:
		if !strings.Contains(fmt.Sprint(err), "terminated") {
			t.Errorf("ended with %v, want SIGTERM", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("still running")
	}
}

// The helper process of TestKillTogetherBeforeTheDeadline: it ignores
// SIGTERM and holds memory, so that SIGKILL takes a while to end it.
func TestMain(m *testing.M) {
	if mib := os.Getenv("GPUHC_TEST_HOG_MIB"); mib != "" {
		hog(mib)
		return
	}
	os.Exit(m.Run())
}

func hog(mib string) {
	signal.Ignore(syscall.SIGTERM)
	var n int
	fmt.Sscan(mib, &n)
	b := make([]byte, n<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	os.Stdout.WriteString("ready\n")
	time.Sleep(time.Minute)
	runtime.KeepAlive(b)
}

// startHog starts this test binary as a hog of mib MiB, as uid 4001 in
// job 4242, and waits until it holds its memory.
func startHog(t *testing.T, mib int) (*exec.Cmd, chan error) {
	t.Helper()
	// uid 4001 must be able to run the binary: a copy in a directory
	// anyone may enter.
	dir, err := os.MkdirTemp("", "gpuhc-hog")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Skip(err)
	}
	bin := filepath.Join(dir, "hog")
	if err := os.WriteFile(bin, self, 0o755); err != nil || os.Chmod(dir, 0o755) != nil {
		t.Skip(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{"SLURM_JOB_ID=4242", fmt.Sprintf("GPUHC_TEST_HOG_MIB=%d", mib)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 4001, Gid: 4001}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a process as uid 4001: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	buf := make([]byte, 6)
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("hog: %q %v", buf, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, done
}

// Review R3: two processes of the job on two GPUs ignore SIGTERM, and
// the check has 3 s. Killed one after the other, each with its grace,
// the second got SIGKILL with no time left to end and drained the node
// ("still there after SIGKILL"), and NVML was blamed for the deadline.
// Killed together, with SIGKILL's wait kept out of the grace, both end
// and nothing FAILs.
func TestKillTogetherBeforeTheDeadline(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to start processes as another user")
	}
	a, doneA := startHog(t, 64)
	b, doneB := startHog(t, 2048)
	m, err := sim.Build("dgxh100", []string{fmt.Sprintf("gpu2:leftover=%d", a.Process.Pid), fmt.Sprintf("gpu3:leftover=%d", b.Process.Pid)})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SLURM_JOB_ID": "4242", "SLURM_JOB_UID": "4001", "SLURM_JOB_GPUS": "2,3"}
	cfg := config.Default().Epilog
	cfg.Leftover = config.LeftoverKill
	cfg.Budget.Duration = 3 * time.Second
	cfg.LeftoverMemoryMiB = 0
	c := &Leftover{
		Node: gpu.NewNode(m.Server, "/", -1, "dgxh100", gpu.WithBus(m.OnBus)),
		Job:  jobenv.Parse(func(key string) string { return env[key] }), Cfg: cfg, Kill: SysKiller{},
		Proc: func(pid int) (Proc, error) { return ReadProc("/", pid) },
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Budget.Duration)
	defer cancel()
	start := time.Now()
	results := c.Run(ctx)
	t.Logf("the check took %s", time.Since(start).Round(time.Millisecond))
	for _, r := range results {
		if r.Status != check.OK && r.Status != check.Warn {
			t.Errorf("%s %s %s %s", r.Component, r.Status, r.Action, r.Message)
		}
		if (r.Component == "gpu2" || r.Component == "gpu3") && !strings.HasPrefix(r.Message, "killed pid") {
			t.Errorf("%s: %s %s", r.Component, r.Status, r.Message)
		}
	}
	for _, done := range []chan error{doneA, doneB} {
		select {
		case err := <-done:
			if !strings.Contains(fmt.Sprint(err), "killed") {
				t.Errorf("ended with %v, want SIGKILL", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("still running")
		}
	}
}
