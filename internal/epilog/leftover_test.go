package epilog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/jobenv"
)

// fakeKiller records kills and answers as told.
type fakeKiller struct {
	calls []string
	gone  bool
	err   error
}

func (k *fakeKiller) Kill(_ context.Context, pid, uid int, grace time.Duration) (bool, error) {
	k.calls = append(k.calls, fmt.Sprintf("kill %d uid %d grace %s", pid, uid, grace))
	return k.gone, k.err
}

// proc is a fixture process: /proc/<pid>/{status,cgroup,environ}.
type proc struct {
	pid     int
	uids    [4]int
	comm    string
	cgroup  string
	environ string
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
		for name, data := range map[string]string{"status": status, "cgroup": p.cgroup, "environ": p.environ} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func user(pid, uid int, comm string) proc {
	return proc{pid: pid, uids: [4]int{uid, uid, uid, uid}, comm: comm}
}

const (
	jobUID = 1001
	v1Job  = "12:devices:/slurm/uid_1001/job_%s/step_0\n0::/slurm/uid_1001/job_%s/step_0/task_0\n"
	v2Job  = "0::/system.slice/slurmstepd.scope/job_%s/step_0/user/task_0\n"
)

func TestLeftover(t *testing.T) {
	tests := []struct {
		name   string
		inject []string
		procs  []proc
		mode   string
		memMiB int
		uid    int    // the job's uid; jobUID when 0 and not rootJob
		gpus   string // SLURM_JOB_GPUS
		noKill bool   // no killer (dry run, simulation)
		killer fakeKiller
		// want is "gpuN STATUS action message-part" for every result
		// that is not an OK "no process" line.
		want      []string
		wantKills []string
	}{
		{name: "healthy: nothing left", mode: config.LeftoverReport},
		{name: "report: the job's process", inject: []string{"gpu2:leftover=4242/2048"}, procs: []proc{user(4242, jobUID, "python3")},
			mode: config.LeftoverReport, want: []string{"gpu2 WARN none pid 4242 (python3, uid 1001) holds 2048 MiB after job 4242 [simulated]"}},
		{name: "drain: the job's process", inject: []string{"gpu2:leftover=4242"}, procs: []proc{user(4242, jobUID, "python3")},
			mode: config.LeftoverDrain, want: []string{"gpu2 FAIL drain pid 4242 (python3, uid 1001) holds 1024 MiB after job 4242"}},
		{name: "drain: two of the job's processes, one named by its cgroup v2", inject: []string{"gpu2:leftover=4242", "gpu2:leftover=4343"},
			procs: []proc{user(4242, jobUID, "python3"), {pid: 4343, uids: [4]int{jobUID, jobUID, jobUID, jobUID}, comm: "torchrun", cgroup: fmt.Sprintf(v2Job, "4242")}},
			mode:  config.LeftoverDrain, want: []string{"gpu2 FAIL drain pid 4242 (python3, uid 1001) holds 1024 MiB (+1 more) after job 4242"}},
		{name: "kill: the job's process is killed", inject: []string{"gpu2:leftover=4242"}, procs: []proc{user(4242, jobUID, "python3")},
			mode: config.LeftoverKill, killer: fakeKiller{gone: true},
			want:      []string{"gpu2 WARN none killed pid 4242 (python3, uid 1001) holds 1024 MiB left by job 4242"},
			wantKills: []string{"kill 4242 uid 1001 grace 2s"}},
		{name: "kill: still there after SIGKILL", inject: []string{"gpu2:leftover=4242"}, procs: []proc{user(4242, jobUID, "python3")},
			mode: config.LeftoverKill, killer: fakeKiller{gone: false},
			want:      []string{"gpu2 FAIL drain pid 4242 (python3, uid 1001) holds 1024 MiB after job 4242: still there after SIGKILL"},
			wantKills: []string{"kill 4242 uid 1001 grace 2s"}},
		{name: "kill: the pid was reused by another user meanwhile", inject: []string{"gpu2:leftover=4242"}, procs: []proc{user(4242, jobUID, "python3")},
			mode: config.LeftoverKill, killer: fakeKiller{err: errNotOwner}, wantKills: []string{"kill 4242 uid 1001 grace 2s"}},
		{name: "kill in a dry run or simulation: would kill", inject: []string{"gpu2:leftover=4242"}, procs: []proc{user(4242, jobUID, "python3")},
			mode: config.LeftoverKill, noKill: true, want: []string{"gpu2 WARN none would kill pid 4242 (python3, uid 1001)"}},
		{name: "root's process (a daemon) is not the job's", inject: []string{"gpu2:leftover=900"}, procs: []proc{user(900, 0, "nv-hostengine")},
			mode: config.LeftoverKill, killer: fakeKiller{gone: true}},
		{name: "another user's process is not judged, nor the memory under it", inject: []string{"gpu2:leftover=5000/4096"},
			procs: []proc{user(5000, 1002, "python3")}, mode: config.LeftoverDrain, gpus: "2", killer: fakeKiller{gone: true}},
		{name: "the same user's other job is not this job's", inject: []string{"gpu2:leftover=5000"},
			procs: []proc{{pid: 5000, uids: [4]int{jobUID, jobUID, jobUID, jobUID}, comm: "python3", cgroup: fmt.Sprintf(v1Job, "999", "999")}},
			mode:  config.LeftoverKill, killer: fakeKiller{gone: true}},
		{name: "the same user's process named by SLURM_JOB_ID", inject: []string{"gpu2:leftover=5000"},
			procs: []proc{{pid: 5000, uids: [4]int{jobUID, jobUID, jobUID, jobUID}, comm: "python3", environ: "HOME=/home/a\x00SLURM_JOB_ID=4242\x00"}},
			mode:  config.LeftoverDrain, want: []string{"gpu2 FAIL drain pid 5000 (python3, uid 1001)"}},
		{name: "a root job's process (cgroup says so) is reported, never killed", uid: -2, inject: []string{"gpu2:leftover=4242"},
			procs: []proc{{pid: 4242, comm: "python3", cgroup: fmt.Sprintf(v1Job, "4242", "4242")}},
			mode:  config.LeftoverKill, killer: fakeKiller{gone: true},
			want: []string{"gpu2 FAIL drain pid 4242 (python3, uid 0) holds 1024 MiB after job 4242: not killed"}},
		{name: "a setuid process of the user is never killed", inject: []string{"gpu2:leftover=4242"},
			procs: []proc{{pid: 4242, uids: [4]int{jobUID, 0, 0, 0}, comm: "sudo"}}, mode: config.LeftoverKill, killer: fakeKiller{gone: true},
			want: []string{"gpu2 FAIL drain pid 4242 (sudo, uid 1001) holds 1024 MiB after job 4242: not killed"}},
		{name: "a process gone since NVML listed it", inject: []string{"gpu2:leftover=4242"}, mode: config.LeftoverDrain},
		{name: "an unreadable owner is could-not-check", inject: []string{"gpu2:leftover=4242"}, procs: []proc{{pid: 4242, garbage: true}},
			mode: config.LeftoverDrain, want: []string{"gpu2 ERROR none pid 4242: cannot tell whose it is"}},
		{name: "memory not released, report", inject: []string{"gpu2:memused=2048"}, mode: config.LeftoverReport, gpus: "2,3",
			want: []string{"gpu2 WARN none 2048 MiB in use after job 4242 > 1024, no process holds it"}},
		{name: "memory not released, drain", inject: []string{"gpu2:memused=2048"}, mode: config.LeftoverDrain, gpus: "2",
			want: []string{"gpu2 FAIL reset-gpu 2048 MiB in use after job 4242 > 1024"}},
		{name: "memory not released after a kill", inject: []string{"gpu2:leftover=4242/512", "gpu2:memused=2048"},
			procs: []proc{user(4242, jobUID, "python3")}, mode: config.LeftoverKill, gpus: "2", killer: fakeKiller{gone: true},
			want:      []string{"gpu2 FAIL reset-gpu 2560 MiB in use after job 4242 > 1024"},
			wantKills: []string{"kill 4242 uid 1001 grace 2s"}},
		{name: "memory under the threshold", inject: []string{"gpu2:memused=1000"}, mode: config.LeftoverDrain, gpus: "2"},
		{name: "memory threshold 0 does not judge", inject: []string{"gpu2:memused=8192"}, mode: config.LeftoverDrain, memMiB: -1},
		{name: "memory of a GPU that is not the job's", inject: []string{"gpu5:memused=8192"}, mode: config.LeftoverDrain, gpus: "2"},
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
			cfg := config.Default().Epilog
			cfg.Leftover = tt.mode
			switch {
			case tt.memMiB < 0:
				cfg.LeftoverMemoryMiB = 0
			case tt.memMiB > 0:
				cfg.LeftoverMemoryMiB = tt.memMiB
			}
			k := tt.killer
			c := &Leftover{
				Node: gpu.NewNode(m.Server, root, -1, "dgxh100", gpu.WithBus(m.OnBus)),
				Job:  jobenv.Parse(func(key string) string { return env[key] }), Cfg: cfg, Kill: &k,
				Proc: func(pid int) (Proc, error) { return ReadProc(root, pid) },
			}
			if tt.noKill {
				c.Kill = nil
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			results := c.Run(ctx)
			if len(results) != 8 {
				t.Fatalf("%d results, want one per GPU: %+v", len(results), results)
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
			if strings.Join(k.calls, "|") != strings.Join(tt.wantKills, "|") {
				t.Errorf("kills %q, want %q", k.calls, tt.wantKills)
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
		{pid: 10, uids: [4]int{1001, 1001, 1001, 1001}, comm: "python3", cgroup: fmt.Sprintf(v1Job, "77", "77")},
		{pid: 11, uids: [4]int{1001, 1001, 1001, 1001}, comm: "a.out", cgroup: "0::/user.slice\n", environ: "X=1\x00SLURM_JOB_ID=78\x00"},
		{pid: 12, uids: [4]int{1001, 1001, 1001, 1001}, comm: "sh", environ: "SLURM_JOB_ID=../../x\x00"},
		{pid: 13, garbage: true},
	})
	tests := []struct {
		pid  int
		want string
		err  string
	}{
		{10, "python3 1001 job 77", ""},
		{11, "a.out 1001 job 78", ""},
		{12, "sh 1001 job ", ""},
		{13, "", "Uid line"},
		{14, "", "process gone"},
		{0, "", "not a process"},
	}
	for _, tt := range tests {
		p, err := ReadProc(root, tt.pid)
		got := fmt.Sprintf("%s %d job %s", p.Comm, p.UID(), p.JobID)
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

// SysKiller refuses what it must never do, before any signal.
func TestSysKillerRefuses(t *testing.T) {
	for _, c := range []struct{ pid, uid int }{{1, 1001}, {0, 1001}, {os.Getpid(), 0}} {
		if gone, err := (SysKiller{}).Kill(context.Background(), c.pid, c.uid, 0); gone || err == nil {
			t.Errorf("pid %d uid %d: gone %v err %v", c.pid, c.uid, gone, err)
		}
	}
	// Our own process is not the job user's (unless the tests run as uid
	// 1001): the ownership check refuses it.
	if os.Getuid() != 4001 {
		if gone, err := (SysKiller{}).Kill(context.Background(), os.Getpid(), 4001, 0); gone || err == nil {
			t.Errorf("own pid: gone %v err %v", gone, err)
		}
	}
}

// A real process of another uid (root only: the test starts it as uid
// 4001): the wrong uid is refused and leaves it running; the right one
// ends it with SIGTERM.
func TestSysKillerKills(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to start a process as another user")
	}
	cmd := exec.Command("/bin/sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 4001, Gid: 4001}}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a process as uid 4001: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	if gone, err := (SysKiller{}).Kill(context.Background(), pid, 4002, time.Second); gone || !errors.Is(err, errNotOwner) {
		t.Fatalf("wrong uid: gone %v err %v", gone, err)
	}
	select {
	case err := <-done:
		t.Fatalf("killed by the wrong uid: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	gone, err := (SysKiller{}).Kill(context.Background(), pid, 4001, 2*time.Second)
	if !gone || err != nil {
		t.Fatalf("gone %v err %v", gone, err)
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
