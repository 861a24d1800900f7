package epilog

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/procscan"
)

var canonicalJob = regexp.MustCompile(`^(|[1-9][0-9]{0,19})$`)

// /proc/<pid>/status, cgroup and environ as any process (the job's own
// user) can shape them: uids are four real ids, the job id is digits or
// nothing (it names files and is matched against Slurm's), the name is
// one line.
func FuzzParseStatus(f *testing.F) {
	for _, s := range []string{"", "Name:\tpython\nUid:\t1000\t1000\t1000\t1000\n", "Uid:\t0 0 0", "Uid: 4294967295 0 0 0", "Uid: -1 0 0 0",
		"Name:\ta:b\nUid:\t1 2 3 4\nUid:\t5 6 7 8", "0::/system.slice/slurmstepd.scope/job_123/step_0/user/task_0",
		"12:memory:/slurm/uid_1000/job_007/step_0", "SLURM_JOB_ID=42\x00SLURM_JOB_ID=7", "SLURM_JOB_ID=\x00", "X=1\x00SLURM_JOB_ID=123456789012345678901"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, err := parseStatus(b); err == nil && (strings.ContainsAny(p.Comm, "\n") || p.UIDs[0] < 0 || p.UIDs[3] > 1<<32-1 || !strings.Contains(string(b), "Uid")) {
			t.Fatalf("parseStatus(%q) = %+v", b, p)
		}
		for _, job := range []string{cgroupJob(b), environJob(b)} {
			if !canonicalJob.MatchString(job) || !strings.Contains(string(b), job) {
				t.Fatalf("job id %q from %q", job, b)
			}
		}
	})
}

// readStat and procscan read the same /proc/<pid>/stat: where both
// accept it they must agree on the state (a zombie is not signalled).
func FuzzReadStat(f *testing.F) {
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("1 (a) b) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"))
	f.Add([]byte("1 a) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 0 20"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, "stat"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		state, start, err := readStat(dir)
		if err != nil {
			return
		}
		st, perr := procscan.ParseStat(b)
		if start == 0 || perr == nil && st.State != state {
			t.Fatalf("readStat(%q) = %q, %d; procscan: %q, %v", b, state, start, st.State, perr)
		}
		if s, serr := st.Start(); perr == nil && (serr != nil || s != start) {
			t.Fatalf("readStat(%q) start %d; procscan %d, %v", b, start, s, serr)
		}
	})
}
