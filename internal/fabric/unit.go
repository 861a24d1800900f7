package fabric

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuhc/gpuhc/internal/procscan"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// How the unit's state is read, without systemctl (no exec, no PATH, and
// no D-Bus round trip that could hang on a sick node):
//
//   - Is the node run by systemd at all? sd_booted(3) answers that by the
//     existence of /run/systemd/system/, and documents that as the test.
//     Without it, there is no unit to judge and only the process counts.
//   - systemd runs every service in the control group named after it,
//     below its slice ("/system.slice/nvidia-fabricmanager.service"), and
//     removes that group when the unit stops. So the unit is active with
//     Fabric Manager in it when the daemon's /proc/<pid>/cgroup names the
//     unit: the "0::" line under cgroup v2, the "name=systemd" line under
//     v1 (any line is accepted, as the path is the same in each). This is
//     what `systemctl status` itself shows as the unit's CGroup. A daemon
//     started by hand or in a container sits in another group, and the
//     unit is then not what keeps it running.
//   - If the daemon's cgroup file cannot be read, the unit's own group is
//     looked at: a non-empty cgroup.procs under system.slice (v2 at
//     /sys/fs/cgroup, hybrid at /sys/fs/cgroup/unified, v1 at
//     /sys/fs/cgroup/systemd) means the unit is active.
//
// systemd's private state (/run/systemd/units/invocation:<unit>) is not
// used: it is not a documented interface.

// systemdBooted says whether root's node runs systemd (sd_booted(3)).
func systemdBooted(root string) bool {
	fi, err := os.Stat(at(root, "run/systemd/system"))
	return err == nil && fi.IsDir()
}

// unitActive says whether unit runs one of procs, judged by their cgroups;
// err when nothing could be read to tell.
func unitActive(root, unit string, procs []fmProc) (bool, error) {
	var firstErr error
	for _, p := range procs {
		in, err := inUnit(p.dir, unit)
		if err == nil {
			if in {
				return true, nil
			}
			continue
		}
		if !procscan.Vanished(err) && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		// Every daemon's cgroup was read and none names the unit.
		return false, nil
	}
	active, err := unitGroupPopulated(root, unit)
	if err != nil {
		return false, fmt.Errorf("%v; %w", firstErr, err)
	}
	if !active {
		return false, firstErr
	}
	return true, nil
}

// inUnit reads <proc dir>/cgroup ("0::/system.slice/x.service" lines) and
// says whether any path has the unit as one of its elements (a service
// may delegate sub-groups below its own).
func inUnit(dir, unit string) (bool, error) {
	path := filepath.Join(dir, "cgroup")
	b, err := sysread.File(path, maxProc)
	if err != nil {
		return false, err
	}
	seen := false
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			return false, fmt.Errorf("%s: %s is not a cgroup line", path, sysread.QuoteShort(line))
		}
		seen = true
		for _, elem := range strings.Split(parts[2], "/") {
			if elem == unit {
				return true, nil
			}
		}
	}
	if !seen {
		return false, fmt.Errorf("%s: empty", path)
	}
	return false, nil
}

// unitGroupPopulated looks for a process in the unit's own cgroup.
func unitGroupPopulated(root, unit string) (bool, error) {
	var firstErr error
	for _, base := range []string{"sys/fs/cgroup", "sys/fs/cgroup/unified", "sys/fs/cgroup/systemd"} {
		path := at(root, base, "system.slice", unit, "cgroup.procs")
		b, err := sysread.File(path, maxProc)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			if firstErr == nil {
				firstErr = err
			}
		case strings.TrimSpace(string(b)) != "":
			return true, nil
		}
	}
	return false, firstErr
}
