package fabric

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// commLen is the most the kernel keeps of a process name (TASK_COMM_LEN-1):
// "nv-fabricmanager" has 16 bytes, so its comm is "nv-fabricmanage".
const commLen = 15

// userHZ is the unit of /proc/<pid>/stat's start time: USER_HZ, which the
// kernel reports in as 100 on every architecture Linux runs GPUs on.
const userHZ = 100

// fmProc is one running Fabric Manager process.
type fmProc struct {
	pid   int
	start uint64 // clock ticks after boot (/proc/<pid>/stat field 22)
	dir   string // its /proc directory
}

// procScan is what one pass over /proc found.
type procScan struct {
	procs      []fmProc
	unreadable int   // processes we could not read (not counting vanished ones)
	firstErr   error // the first such error, for the message
}

// scanProcs finds the processes called name under root/proc, by comm and,
// when comm is the kernel's truncation of name, by argv[0]'s base name.
// Zombies do not count: a dead daemon is not running.
func scanProcs(ctx context.Context, root, name string) (*procScan, error) {
	dir := at(root, "proc")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, bare(err))
	}
	sc := &procScan{}
	for _, e := range ents {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted: %w", ctx.Err())
		}
		if !isPID(e.Name()) {
			continue
		}
		p, ok, err := visit(filepath.Join(dir, e.Name()), name)
		switch {
		case err != nil:
			sc.note(err)
		case ok:
			sc.procs = append(sc.procs, p)
		}
	}
	return sc, nil
}

func (sc *procScan) note(err error) {
	if vanished(err) {
		return
	}
	sc.unreadable++
	if sc.firstErr == nil {
		sc.firstErr = err
	}
}

// oldest is the process that stands for Fabric Manager: with DAEMONIZE=1
// there is one, but a helper it forks must not change its identity.
func (sc *procScan) oldest() (fmProc, bool) {
	if len(sc.procs) == 0 {
		return fmProc{}, false
	}
	best := sc.procs[0]
	for _, p := range sc.procs[1:] {
		if p.start < best.start || (p.start == best.start && p.pid < best.pid) {
			best = p
		}
	}
	return best, true
}

func isPID(s string) bool {
	return s != "" && len(s) <= 10 && strings.Trim(s, "0123456789") == ""
}

// vanished reports errors of a process that exited while we read it,
// which is normal on a busy node.
func vanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// visit reads one /proc/<pid> and says whether it is a live name.
func visit(dir, name string) (fmProc, bool, error) {
	path := filepath.Join(dir, "stat")
	b, err := readFile(path, maxAttr)
	if err != nil {
		return fmProc{}, false, err
	}
	st, err := parseStat(b)
	if err != nil {
		return fmProc{}, false, fmt.Errorf("parse %s: %w", path, err)
	}
	if st.state == 'Z' || st.state == 'X' {
		return fmProc{}, false, nil
	}
	switch {
	case st.comm == name:
	case len(name) > commLen && len(st.comm) == commLen && name[:commLen] == st.comm:
		// Read cmdline only now: such reads can block on a process stuck
		// in the kernel, so we avoid them for every other pid.
		ok, err := argv0Matches(dir, name)
		if err != nil || !ok {
			return fmProc{}, false, err
		}
	default:
		return fmProc{}, false, nil
	}
	pid, _ := strconv.Atoi(filepath.Base(dir))
	return fmProc{pid: pid, start: st.start, dir: dir}, true, nil
}

// argv0Matches tells "nv-fabricmanager" from another name sharing its
// first 15 bytes, by argv[0]. An empty argv[0], or one rewritten into a
// title with spaces, cannot disprove the comm match.
func argv0Matches(dir, name string) (bool, error) {
	b, err := readFile(filepath.Join(dir, "cmdline"), maxProc)
	if err != nil {
		return false, err
	}
	argv0, _, _ := bytes.Cut(b, []byte{0})
	s := string(argv0)
	return s == "" || strings.Contains(s, " ") || filepath.Base(s) == name, nil
}

type stat struct {
	comm  string
	state byte
	start uint64
}

// parseStat reads "812 (nv-fabricmanage) S 1 812 ... <starttime> ...".
// comm may itself hold spaces and parentheses, so it runs to the last ')';
// the fields after it start at field 3 (state), so starttime (field 22)
// is the 20th of them.
func parseStat(b []byte) (stat, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return stat{}, fmt.Errorf("no (comm) in %s", quoteShort(string(b)))
	}
	rest := bytes.Fields(b[end+1:])
	if len(rest) < 20 || len(rest[0]) != 1 {
		return stat{}, fmt.Errorf("too few fields after comm in %s", quoteShort(string(b)))
	}
	start, err := strconv.ParseUint(string(rest[19]), 10, 64)
	if err != nil {
		return stat{}, fmt.Errorf("start time %s is not a number", quoteShort(string(rest[19])))
	}
	return stat{comm: string(b[open+1 : end]), state: rest[0][0], start: start}, nil
}

// bootTime reads btime (seconds since the epoch) from root/proc/stat.
func bootTime(root string) (int64, error) {
	path := at(root, "proc/stat")
	b, err := readFile(path, maxStat)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(line, "btime ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%s: btime %s is not a positive number", path, quoteShort(v))
		}
		return n, nil
	}
	return 0, fmt.Errorf("%s: no btime line", path)
}

// instance identifies one run of Fabric Manager across gpuhc runs: a new
// PID or start time is a restart, a new boot time a reboot (PIDs and start
// ticks repeat across identical boots).
type instance struct {
	id      string    // "" when not running
	started time.Time // zero when the boot time is unknown
	procs   []fmProc  // every process of the name, for the unit check
}

func newInstance(p fmProc, btime int64) instance {
	in := instance{id: fmt.Sprintf("pid %d start %d boot %d", p.pid, p.start, btime)}
	if btime > 0 {
		// Whole seconds first: ticks times 1e9 overflows after years of uptime.
		secs, frac := int64(p.start/userHZ), int64(p.start%userHZ)
		in.started = time.Unix(btime+secs, frac*int64(time.Second)/userHZ)
	}
	return in
}
