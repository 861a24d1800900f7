// Package ib holds gpuhc's InfiniBand and RoCE checks
// (docs/architecture.md#infiniband-and-roce): port state and speed
// (ib.port), error-counter growth between runs (ib.counters) and GPUDirect
// RDMA readiness (ib.gdr).
//
// Every check reads sysfs and procfs under a root directory ("/" on a node,
// a fixture tree in tests). The RDMA devices themselves are scanned once
// a run (Gather) and judged by every check from that one scan. Nothing is
// executed; only ib.counters writes, and only its record in the state
// directory.
package ib

import (
	"context"
	"fmt"
	"strconv"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// Check names, as they appear in results and drain reasons.
const (
	namePort     = "ib.port"
	nameCounters = "ib.counters"
	nameGDR      = "ib.gdr"
)

// componentHost is used for results about the node as a whole.
const componentHost = "host"

// maxProc caps /proc/modules: small, but a garbage or hostile fixture
// must not make us read gigabytes.
const maxProc = 16 << 20

// printable is sysread.Printable, applied to every message and component.
func printable(s string) string { return sysread.Printable(s) }

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
