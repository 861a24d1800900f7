package bandwidth

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/lazyre"
)

// allReduceSize is the one message size all_reduce_perf runs: large
// enough to reach the bus bandwidth on NVLink, short enough for a prolog.
const allReduceSize = "1G"

// allReduce is what all_reduce_perf reported.
type allReduce struct {
	size      int64   // bytes of the largest size run
	busbw     float64 // its bus bandwidth, GB/s (the better of out-of-place and in-place)
	wrong     int64   // wrong elements over all rows; -1 when not validated
	oob       int64   // "Out of bounds values", -1 when not printed
	oobFailed bool
	avg       float64 // "# Avg bus bandwidth"
}

var (
	arOutOfBounds = lazyre.New(`Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)`)
	arAvgBusBW    = lazyre.New(`Avg bus bandwidth\s*:\s*(\S+)`)
)

// parseAllReduce reads nccl-tests output of any version since 2019: the
// column header names the columns ("size count type redop root time algbw
// busbw #wrong time algbw busbw #wrong"; older ones lack root or redop,
// and say "error" for "#wrong"), data rows have as many fields, and the
// "# Avg bus bandwidth" line marks a run that finished.
func parseAllReduce(out []byte) (allReduce, error) {
	r := allReduce{wrong: -1, oob: -1}
	var head []string
	busbw, wrongCol := []int{}, []int{}
	rows, avgSeen := 0, false
	for _, l := range lines(out) {
		t := strings.TrimSpace(l)
		if m := arOutOfBounds.FindStringSubmatch(t); m != nil {
			n, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil {
				return r, fmt.Errorf("out of bounds count %q", m[1])
			}
			r.oob, r.oobFailed = n, m[2] == "FAILED"
			continue
		}
		if m := arAvgBusBW.FindStringSubmatch(t); m != nil {
			v, err := strconv.ParseFloat(m[1], 64)
			if err != nil || !(v >= 0) || math.IsInf(v, 0) {
				return r, fmt.Errorf("average bus bandwidth %q is not a bandwidth", printable(m[1]))
			}
			r.avg, avgSeen = v, true
			continue
		}
		f := strings.Fields(strings.TrimLeft(t, "#"))
		if head == nil {
			if len(f) > 0 && f[0] == "size" {
				for i, h := range f {
					if h == "busbw" {
						busbw = append(busbw, i)
						wrongCol = append(wrongCol, i+1)
					}
				}
				if len(busbw) > 0 {
					head = f
				}
			}
			continue
		}
		if strings.HasPrefix(t, "#") || len(f) == 0 {
			continue
		}
		size, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue // NCCL's INFO/WARN lines and other chatter
		}
		if len(f) != len(head) {
			return r, fmt.Errorf("row %q has %d fields, the header %d", printable(t), len(f), len(head))
		}
		best := -1.0
		for k, col := range busbw {
			if v, err := strconv.ParseFloat(f[col], 64); err == nil && v >= 0 && !math.IsInf(v, 0) {
				best = max(best, v)
			}
			if wrongCol[k] < len(head) && head[wrongCol[k]] == "#wrong" {
				if n, err := strconv.ParseInt(f[wrongCol[k]], 10, 64); err == nil && n >= 0 {
					// Saturating: a sum that wrapped negative would read as
					// "not validated" and pass a run with wrong results.
					sum := max(r.wrong, 0)
					r.wrong = sum + min(n, math.MaxInt64-sum)
				}
			}
		}
		if best < 0 {
			return r, fmt.Errorf("row %q has no bus bandwidth", printable(t))
		}
		rows++
		if size >= r.size {
			r.size, r.busbw = size, best
		}
	}
	switch {
	case head == nil:
		return r, errors.New("no result table (no header with busbw)")
	case rows == 0:
		return r, errors.New("result table without rows")
	case !avgSeen:
		return r, errors.New(`no "Avg bus bandwidth" line: the run did not finish`)
	}
	return r, nil
}

// allReduce runs all_reduce_perf over every GPU in one process.
func (m *measurement) allReduce(ctx context.Context, c config.Bandwidth, gpus int) {
	switch {
	case gpus == 0:
		m.add(check.Result{Component: componentAllReduce, Status: check.Skip, Message: "all_reduce_perf: no CUDA device"})
		return
	case gpus == 1:
		m.add(check.Result{Component: componentAllReduce, Status: check.Skip, Message: "all_reduce_perf: one GPU, nothing to reduce across"})
		return
	case gpus < 0:
		m.add(errorf(componentAllReduce, "all_reduce_perf: not run: the GPU count comes from the in-process measurement (libcuda), which did not count them"))
		return
	}
	out, runErr := runTool(ctx, c.AllReducePerf, "-b", allReduceSize, "-e", allReduceSize, "-f", "2", "-g", strconv.Itoa(gpus), "-c", "1")
	r, err := parseAllReduce(out.stdout)
	switch {
	case runErr != nil:
		m.add(errorf(componentAllReduce, "%s", printable(runErr.Error())))
		return
	case err != nil:
		m.add(errorf(componentAllReduce, "all_reduce_perf: output not understood: %v", err))
		return
	case r.wrong > 0 || r.oobFailed:
		n := max(r.wrong, r.oob)
		m.add(check.Result{Component: componentAllReduce, Status: check.Fail, Action: check.ActionDrain,
			Message: fmt.Sprintf("all_reduce_perf: %d wrong values in the results (busbw %.1f GB/s)", n, r.busbw)})
		return
	}
	j := judged{component: componentAllReduce, kind: KindAllReduce, label: "all_reduce busbw", unit: "GB/s",
		counts: "at " + sizeText(r.size), value: r.busbw, floor: c.AllReduceGBps, noFloor: "no floor set"}
	m.addFigure(j.verdict())
}

// sizeText writes a byte count as nccl-tests sizes are usually given.
func sizeText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}
