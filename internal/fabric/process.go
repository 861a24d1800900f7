package fabric

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/procscan"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

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
	procs []fmProc
	procscan.Unreadable
}

// scanProcs finds the processes running each of names under root/proc
// (see procscan.Runs), in one pass: the result has one scan per name.
// Zombies do not count: a dead daemon is not running.
func scanProcs(ctx context.Context, root string, names ...string) ([]*procScan, error) {
	scs := make([]*procScan, len(names))
	for i := range scs {
		scs[i] = &procScan{}
	}
	err := procscan.Walk(ctx, root, func(dir string) bool {
		for i, name := range names {
			p, ok, err := visit(dir, name)
			switch {
			case err != nil:
				scs[i].Note(err)
			case ok:
				scs[i].procs = append(scs[i].procs, p)
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return scs, nil
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

// visit reads one /proc/<pid> and says whether it runs name.
func visit(dir, name string) (fmProc, bool, error) {
	st, err := procscan.ReadStat(dir)
	if err != nil {
		return fmProc{}, false, err
	}
	start, err := st.Start()
	if err != nil {
		return fmProc{}, false, fmt.Errorf("parse %s: %w", filepath.Join(dir, "stat"), err)
	}
	if st.Dead() {
		return fmProc{}, false, nil
	}
	if ok, err := procscan.Runs(dir, st.Comm, name, maxProc); err != nil || !ok {
		return fmProc{}, false, err
	}
	pid, _ := strconv.Atoi(filepath.Base(dir))
	return fmProc{pid: pid, start: start, dir: dir}, true, nil
}

// bootTime reads btime (seconds since the epoch) from root/proc/stat.
func bootTime(root string) (int64, error) {
	path := at(root, "proc/stat")
	b, err := sysread.File(path, maxStat)
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
			return 0, fmt.Errorf("%s: btime %s is not a positive number", path, sysread.QuoteShort(v))
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
