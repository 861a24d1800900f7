// Package host holds gpuhc's checks of the host itself: temperatures,
// kernel modules, daemons, mounts, memory and CPUs.
//
// Every check reads kernel files under a root directory ("/" on a node, a
// fixture tree in tests). Nothing is executed, and nothing is written
// except the mounts check's optional probe file.
package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/gpuhc/gpuhc/internal/check"
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

// Size caps for reads: kernel files are small, but a garbage or hostile
// fixture must not make us read gigabytes.
const (
	maxAttr = 4 << 10  // one sysfs attribute
	maxProc = 64 << 20 // a whole /proc table (mountinfo on a busy k8s node is MBs)
)

// at joins the check's root and a kernel path such as "/proc/modules".
func at(root string, elem ...string) string {
	return filepath.Join(append([]string{root}, elem...)...)
}

// readFile reads a whole kernel file of at most max bytes. The error names
// the path once (os errors already carry it, so the inner one is unwrapped).
func readFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, bare(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, bare(err))
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("read %s: larger than %d bytes", path, max)
	}
	return b, nil
}

// readAttr reads a one-line sysfs attribute without its newline.
func readAttr(path string) (string, error) {
	b, err := readFile(path, maxAttr)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// bare strips an *fs.PathError down to its errno so paths are not repeated.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// printable makes text read from the kernel safe for a one-line message or
// component: drain reasons must be a single printable line.
func printable(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '?'
	}, s)
	return strings.TrimSpace(s)
}

// quoteShort quotes a garbage value for a message, cut so the message
// stays short.
func quoteShort(s string) string {
	const max = 24
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strconv.Quote(s)
}

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
