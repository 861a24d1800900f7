// Package host holds gpuhc's checks of the host itself: temperatures,
// kernel modules, daemons, mounts, memory and CPUs.
//
// Every check reads kernel files under a root directory ("/" on a node, a
// fixture tree in tests). Nothing is executed, and nothing is written
// except the mounts check's optional probe file.
package host

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// Check names, as they appear in results and drain reasons.
const (
	nameThermal   = "host.thermal"
	nameModules   = "host.modules"
	nameProcesses = "host.processes"
	nameMounts    = "host.mounts"
	nameMemory    = "host.memory"
	nameCPU       = "host.cpu"
)

// componentHost is used for results about the node as a whole, and for
// errors that stop a check before it reaches any one component.
const componentHost = "host"

// maxProc caps a whole /proc table: mountinfo on a busy k8s node is MBs,
// and a garbage or hostile fixture must not make us read gigabytes.
const maxProc = 64 << 20

// at joins the check's root and a kernel path such as "/proc/modules".
func at(root string, elem ...string) string {
	return filepath.Join(append([]string{root}, elem...)...)
}

// printable is sysread.Printable, applied to every message and component.
func printable(s string) string { return sysread.Printable(s) }

// fmtBytes writes a byte count in binary units: "12.3 GiB", "50 GiB".
func fmtBytes(b uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(b), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0")
	return s + " " + units[i]
}

func result(comp string, st check.Status, act check.Action, format string, a ...any) check.Result {
	return check.Result{
		Component: printable(comp),
		Status:    st,
		Action:    act,
		Message:   printable(fmt.Sprintf(format, a...)),
	}
}

func okf(comp, format string, a ...any) check.Result {
	return result(comp, check.OK, check.ActionNone, format, a...)
}

func warnf(comp, format string, a ...any) check.Result {
	return result(comp, check.Warn, check.ActionNone, format, a...)
}

// failf is a FAIL that asks for a drain: every host fault we detect makes
// the node unfit for new jobs.
func failf(comp, format string, a ...any) check.Result {
	return result(comp, check.Fail, check.ActionDrain, format, a...)
}

// errorf is "could not check": it never asks for an action.
func errorf(comp, format string, a ...any) check.Result {
	return result(comp, check.Error, check.ActionNone, format, a...)
}

func skipf(comp, format string, a ...any) check.Result {
	return result(comp, check.Skip, check.ActionNone, format, a...)
}

// interrupted is returned when ctx ends mid-scan; the runner usually
// reports the timeout itself, but a caller without a runner gets a result.
func interrupted(ctx context.Context) check.Result {
	return errorf(componentHost, "interrupted: %v", ctx.Err())
}

// stamp fills in the check name, so results are complete even when a
// check is run directly rather than through check.Run.
func stamp(name string, rs []check.Result) []check.Result {
	for i := range rs {
		rs[i].Check = name
	}
	return rs
}
