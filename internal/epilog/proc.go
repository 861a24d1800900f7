package epilog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/lazyre"
)

// Proc is what /proc says about a process holding a GPU.
type Proc struct {
	PID int
	// UIDs are the real, effective, saved and filesystem uids.
	UIDs [4]int
	Comm string
	// JobID is the Slurm job the process belongs to, from its cgroup
	// (task/cgroup: ".../job_123/step_0/...") or its environment
	// (SLURM_JOB_ID); "" when neither says.
	JobID string
	// StartTime is when the process started, in clock ticks after boot
	// (/proc/<pid>/stat field 22): with the pid, it names one process, so
	// a pid reused since is told apart. 0 when there is no stat file (a
	// fixture root without one): such a process is never signalled.
	StartTime uint64
}

// UID is the real uid.
func (p Proc) UID() int { return p.UIDs[0] }

// OwnedBy reports whether every uid of the process is uid: a setuid
// program run by the user (effective root) is not the user's to kill.
func (p Proc) OwnedBy(uid int) bool {
	return p.UIDs[0] == uid && p.UIDs[1] == uid && p.UIDs[2] == uid && p.UIDs[3] == uid
}

// Caps on what is read from /proc: status and cgroup are a few hundred
// bytes; environ is bounded by ARG_MAX and is only searched.
const (
	maxStatus  = 64 << 10
	maxCgroup  = 64 << 10
	maxEnviron = 1 << 20
)

// errGone: the process exited between NVML's list and our look.
var errGone = errors.New("process gone")

// ReadProc reads pid's status, cgroup and environment under root.
func ReadProc(root string, pid int) (Proc, error) {
	if pid <= 0 {
		return Proc{}, fmt.Errorf("pid %d: not a process", pid)
	}
	dir := filepath.Join(root, "proc", strconv.Itoa(pid))
	b, err := readCapped(filepath.Join(dir, "status"), maxStatus)
	if errors.Is(err, os.ErrNotExist) {
		return Proc{}, fmt.Errorf("pid %d: %w", pid, errGone)
	}
	if err != nil {
		return Proc{}, err
	}
	p, err := parseStatus(b)
	if err != nil {
		return Proc{}, fmt.Errorf("%s: %w", filepath.Join(dir, "status"), err)
	}
	p.PID = pid
	switch _, start, err := readStat(dir); {
	case err == nil:
		p.StartTime = start
	case !errors.Is(err, os.ErrNotExist):
		return Proc{}, err
	}
	// Unreadable cgroup or environ files only leave the job unknown.
	if b, err := readCapped(filepath.Join(dir, "cgroup"), maxCgroup); err == nil {
		p.JobID = cgroupJob(b)
	}
	if p.JobID == "" {
		if b, err := readCapped(filepath.Join(dir, "environ"), maxEnviron); err == nil {
			p.JobID = environJob(b)
		}
	}
	return p, nil
}

// readStat reads the state (R, S, D, Z, ...) and the start time from
// /proc/<pid>/stat under dir: "pid (comm) state ppid ..." with the start
// time the 22nd field. comm may hold spaces and parentheses, so the
// fields are counted from the last ')'.
func readStat(dir string) (state byte, start uint64, err error) {
	path := filepath.Join(dir, "stat")
	b, err := readCapped(path, maxStatus)
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("%s: no ')' after the command name", path)
	}
	// fields[0] is field 3 (the state), so field 22 is fields[19].
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("%s: %d fields after the command name, want at least 20", path, len(f))
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil || start == 0 {
		return 0, 0, fmt.Errorf("%s: start time %q is not a positive number", path, f[19])
	}
	return f[0][0], start, nil
}

func readCapped(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		// environ may be cut: a search of its first MiB is all we need.
		b = b[:max]
	}
	return b, nil
}

// parseStatus reads Name and Uid from /proc/<pid>/status.
func parseStatus(b []byte) (Proc, error) {
	var p Proc
	uids := false
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case "Name":
			p.Comm = val
		case "Uid":
			f := strings.Fields(val)
			if len(f) != 4 {
				return Proc{}, fmt.Errorf("Uid line %q: want 4 ids", val)
			}
			for i, s := range f {
				n, err := strconv.ParseUint(s, 10, 32)
				if err != nil {
					return Proc{}, fmt.Errorf("Uid line %q: %w", val, err)
				}
				p.UIDs[i] = int(n)
			}
			uids = true
		}
	}
	if !uids {
		return Proc{}, errors.New("no Uid line")
	}
	return p, nil
}

var jobDir = lazyre.New(`^job_([1-9][0-9]{0,19})$`)

// cgroupJob finds "job_<id>" in the process's cgroup paths, as Slurm's
// task/cgroup names them (v1: /slurm/uid_1000/job_123/step_0; v2:
// /system.slice/slurmstepd.scope/job_123/step_0/user/task_0).
func cgroupJob(b []byte) string {
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, dir := range strings.Split(parts[2], "/") {
			if m := jobDir.FindStringSubmatch(dir); m != nil {
				return m[1]
			}
		}
	}
	return ""
}

// environJob finds SLURM_JOB_ID in a NUL-separated environment.
func environJob(b []byte) string {
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("SLURM_JOB_ID=")); ok {
			if m := jobDir.FindSubmatch(append([]byte("job_"), v...)); m != nil {
				return string(m[1])
			}
			return ""
		}
	}
	return ""
}
