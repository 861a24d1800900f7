// Package ib holds gpuhc's InfiniBand and RoCE checks (design.md §6): port
// state and speed (ib.port), error-counter growth between runs
// (ib.counters) and GPUDirect RDMA readiness (ib.gdr).
//
// Every check reads sysfs and procfs under a root directory ("/" on a node,
// a fixture tree in tests). Nothing is executed; only ib.counters writes,
// and only its record in the state directory.
package ib

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"unicode"

	"github.com/gpuhc/gpuhc/internal/check"
)

// Check names, as they appear in results and drain reasons.
const (
	namePort     = "ib.port"
	nameCounters = "ib.counters"
	nameGDR      = "ib.gdr"
)

// componentHost is used for results about the node as a whole.
const componentHost = "host"

// Size caps for reads: kernel files are small, but a garbage or hostile
// fixture must not make us read gigabytes.
const (
	maxAttr = 4 << 10  // one sysfs attribute
	maxProc = 16 << 20 // /proc/modules
)

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

// printable makes text safe for a one-line message or component: drain
// reasons must be a single printable line.
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

// fmtGbps writes a rate without trailing zeros: "400", "2.5".
func fmtGbps(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func result(name, comp string, st check.Status, format string, a ...any) check.Result {
	act := check.ActionNone
	if st == check.Fail {
		// Every IB fault we detect leaves the node unfit for multi-node jobs.
		act = check.ActionDrain
	}
	return check.Result{
		Check:     name,
		Component: printable(comp),
		Status:    st,
		Action:    act,
		Message:   printable(fmt.Sprintf(format, a...)),
	}
}

// interrupted is returned when ctx ends mid-scan; the runner usually
// reports the timeout itself, but a caller without a runner gets a result.
func interrupted(ctx context.Context, name string) check.Result {
	return result(name, componentHost, check.Error, "interrupted: %v", ctx.Err())
}
