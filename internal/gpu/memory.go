package gpu

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

type memory struct {
	node *Node
	cfg  config.GPUMemory
}

// NewMemory judges each GPU's memory health: uncorrected ECC errors in
// device memory and SRAM, row remapping (Ampere and later) or page
// retirement (earlier GPUs), and the volatile corrected-error count.
func NewMemory(n *Node, c config.GPUMemory) check.Check {
	return &memory{node: n, cfg: c}
}

func (c *memory) Name() string { return "gpu.memory" }

// symSramStatus is newer than R470 (R535 has it): see hasSymbol.
const symSramStatus = "nvmlDeviceGetSramEccErrorStatus"

func (c *memory) Run(ctx context.Context) []check.Result {
	start := time.Now()
	sramStatus, looked := false, false
	return Each(ctx, c.node, func(ctx context.Context, g GPU) []check.Result {
		if !looked {
			// Only now is the library loaded (Each initialised NVML).
			sramStatus, looked = hasSymbol(c.node.Lib(), symSramStatus), true
		}
		v := &gpuVerdict{g: g}
		for _, part := range []func(context.Context, *gpuVerdict) error{
			func(ctx context.Context, v *gpuVerdict) error { return c.ecc(ctx, v, sramStatus) },
			c.rows,
		} {
			if err := part(ctx, v); err != nil {
				return v.abort(err, start)
			}
		}
		return v.results()
	})
}

// hasSymbol reports whether the loaded libnvidia-ml exports sym. go-nvml
// links with unresolved symbols allowed and opens the library lazily, so
// calling a function the installed driver lacks ends the process ("symbol
// lookup error", exit 127) where no recover() can catch it: every call to
// a function newer than R470 must be looked up first, once per run and
// only after Init (before it the library is not loaded and every lookup
// fails). NVIDIA's mock, and so the simulator, reports every symbol
// present; an nvml.Interface without extensions (a bare mock) is taken to
// have them all too, as fabricAPI does.
func hasSymbol(lib nvml.Interface, sym string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = true
		}
	}()
	return lib.Extensions().LookupSymbol(sym) == nil
}

// ecc judges the volatile counters: they count since the driver loaded, so
// a reset or reboot that cures the GPU also clears the FAIL. An error on
// one counter is reported and the others are still judged; SRAM is judged
// whenever ECC is not known to be off.
func (c *memory) ecc(ctx context.Context, v *gpuVerdict, sramStatus bool) error {
	d := v.g.Device
	mode, ret, err := Call(ctx, func() (nvml.EnableState, nvml.Return) {
		cur, _, ret := d.GetEccMode()
		return cur, ret
	})
	switch {
	case err != nil:
		return err
	case Unsupported(ret):
		v.skip("ECC not supported")
		return nil
	case ret != nvml.SUCCESS:
		if err := v.nvmlErr("nvmlDeviceGetEccMode", ret); err != nil {
			return err
		}
	case mode != nvml.FEATURE_ENABLED:
		v.skip("ECC disabled")
		return nil
	default:
		if err := c.counters(ctx, v); err != nil {
			return err
		}
	}
	return c.sram(ctx, v, sramStatus)
}

// counters judges device memory's uncorrected (DBE) and corrected counts.
func (c *memory) counters(ctx context.Context, v *gpuVerdict) error {
	d := v.g.Device
	// Device memory only: SRAM errors are judged, and named, on their own.
	dbe, ret, err := Call(ctx, func() (uint64, nvml.Return) {
		n, ret := d.GetMemoryErrorCounter(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC, nvml.MEMORY_LOCATION_DEVICE_MEMORY)
		if Unsupported(ret) {
			return d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		}
		return n, ret
	})
	dbeZero := false
	switch {
	case err != nil:
		return err
	case ret != nvml.SUCCESS:
		if err := v.nvmlErr("nvmlDeviceGetMemoryErrorCounter(uncorrected)", ret); err != nil {
			return err
		}
	case dbe > 0:
		v.fail(check.ActionDrain, "volatile DBE %d > 0", dbe)
	default:
		dbeZero = true
	}
	corr, ret, err := Call(ctx, func() (uint64, nvml.Return) {
		return d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	})
	switch {
	case err != nil:
		return err
	case Unsupported(ret):
		if dbeZero {
			v.pass("volatile DBE 0")
		}
	case ret != nvml.SUCCESS:
		return v.nvmlErr("nvmlDeviceGetTotalEccErrors(corrected)", ret)
	case corr > c.cfg.CorrectableWarn:
		v.warn("volatile corrected ECC %d > %d", corr, c.cfg.CorrectableWarn)
	case dbeZero:
		v.pass("volatile DBE 0, corrected %d <= %d", corr, c.cfg.CorrectableWarn)
	}
	return nil
}

// sram judges uncorrectable SRAM errors (L1/L2, register files): parity
// and SEC-DED together. The status call (R535+, where the driver has it:
// sramStatus) also says when the aggregate count crossed NVIDIA's
// replacement threshold; any answer from it but a value or a lost GPU (not
// supported, a struct version the driver does not take, no permission,
// ...) falls back to the per-location counter, which every driver has.
func (c *memory) sram(ctx context.Context, v *gpuVerdict, sramStatus bool) error {
	d := v.g.Device
	if sramStatus {
		st, ret, err := Call(ctx, d.GetSramEccErrorStatus)
		switch {
		case err != nil:
			return err
		case ret == nvml.SUCCESS:
			if ue := st.VolatileUncParity + st.VolatileUncSecDed; ue > 0 {
				v.fail(check.ActionDrain, "SRAM uncorrectable %d > 0", ue)
			}
			if st.BThresholdExceeded != 0 {
				v.fail(check.ActionRMA, "SRAM uncorrectable %d over NVIDIA's RMA threshold", st.AggregateUncParity+st.AggregateUncSecDed)
			}
			return nil
		case Lost(ret):
			return v.nvmlErr("nvmlDeviceGetSramEccErrorStatus", ret)
		}
	}
	ue, ret, err := Call(ctx, func() (uint64, nvml.Return) {
		return d.GetMemoryErrorCounter(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC, nvml.MEMORY_LOCATION_SRAM)
	})
	switch {
	case err != nil:
		return err
	case ret == nvml.SUCCESS && ue > 0:
		v.fail(check.ActionDrain, "SRAM uncorrectable %d > 0", ue)
	// INVALID_ARGUMENT: a driver that does not know the SRAM location.
	case ret != nvml.SUCCESS && !Unsupported(ret) && ret != nvml.ERROR_INVALID_ARGUMENT:
		return v.nvmlErr("nvmlDeviceGetMemoryErrorCounter(SRAM)", ret)
	}
	return nil
}

type remapped struct {
	corr, unc       int
	pending, failed bool
}

// rows judges row remapping; GPUs before Ampere retire pages instead, and
// answer "not supported" to the row remapper (and Ampere and later to page
// retirement), so asking is how we tell them apart.
func (c *memory) rows(ctx context.Context, v *gpuVerdict) error {
	r, ret, err := Call(ctx, func() (remapped, nvml.Return) {
		corr, unc, pending, failed, ret := v.g.Device.GetRemappedRows()
		return remapped{corr, unc, pending, failed}, ret
	})
	switch {
	case err != nil:
		return err
	case Unsupported(ret):
		return c.retired(ctx, v)
	case ret != nvml.SUCCESS:
		return v.nvmlErr("nvmlDeviceGetRemappedRows", ret)
	}
	if r.failed {
		v.fail(check.ActionRMA, "row remap failed")
	}
	if r.pending {
		v.fail(check.ActionResetGPU, "row remap pending")
	}
	if !r.failed && !r.pending {
		v.pass("remapped rows: %d correctable, %d uncorrectable", r.corr, r.unc)
	}
	return nil
}

type retirement struct {
	pages   int
	pending nvml.EnableState
}

// retired judges page retirement (before Ampere): NVIDIA replaces a board
// with 60 retired pages, and a pending retirement needs a GPU reset.
func (c *memory) retired(ctx context.Context, v *gpuVerdict) error {
	d := v.g.Device
	r, ret, err := Call(ctx, func() (retirement, nvml.Return) {
		var r retirement
		for _, cause := range []nvml.PageRetirementCause{nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR} {
			pages, ret := d.GetRetiredPages(cause)
			if ret != nvml.SUCCESS {
				return r, ret
			}
			r.pages += len(pages)
		}
		var ret nvml.Return
		r.pending, ret = d.GetRetiredPagesPendingStatus()
		return r, ret
	})
	switch {
	case err != nil:
		return err
	case Unsupported(ret):
		v.skip("neither row remapping nor page retirement supported")
		return nil
	case ret != nvml.SUCCESS:
		return v.nvmlErr("nvmlDeviceGetRetiredPages", ret)
	}
	if r.pages >= c.cfg.RetiredPagesFail {
		v.fail(check.ActionRMA, "retired pages %d >= %d", r.pages, c.cfg.RetiredPagesFail)
	}
	if r.pending == nvml.FEATURE_ENABLED {
		v.fail(check.ActionResetGPU, "page retirement pending")
	}
	if r.pages < c.cfg.RetiredPagesFail && r.pending != nvml.FEATURE_ENABLED {
		v.pass("retired pages %d < %d", r.pages, c.cfg.RetiredPagesFail)
	}
	return nil
}

// gpuVerdict gathers what the parts of a check found on one GPU (shared by
// the per-GPU checks: gpu.memory, gpu.pcie, gpu.thermal, ...): every
// problem is a result of its own, so that each carries its own action; the
// clean parts make one OK line and the parts that do not apply one SKIP.
type gpuVerdict struct {
	g        GPU
	problems []check.Result
	ok       []string
	skipped  []string
}

func (v *gpuVerdict) fail(act check.Action, format string, a ...any) {
	v.problems = append(v.problems, Result(v.g, check.Fail, act, format, a...))
}

func (v *gpuVerdict) warn(format string, a ...any) {
	v.problems = append(v.problems, Result(v.g, check.Warn, check.ActionNone, format, a...))
}

func (v *gpuVerdict) pass(format string, a ...any) { v.ok = append(v.ok, fmt.Sprintf(format, a...)) }

func (v *gpuVerdict) skip(format string, a ...any) {
	v.skipped = append(v.skipped, fmt.Sprintf(format, a...))
}

// errGPUGone stops the judgement of a GPU NVML calls lost or in need of a
// reset: every further call would answer the same.
var errGPUGone = errors.New("GPU lost or in need of a reset")

// nvmlErr reports an NVML answer that is neither a value nor "not
// supported" as an ERROR (a lost GPU too: gpu.lost carries its FAIL). It
// returns errGPUGone for a lost GPU, so that a part can end the GPU's
// judgement with one ERROR instead of one per call.
func (v *gpuVerdict) nvmlErr(op string, ret nvml.Return) error {
	v.problems = append(v.problems, Result(v.g, check.Error, check.ActionNone, "%s: %s", op, nvml.ErrorString(ret)))
	if Lost(ret) {
		return errGPUGone
	}
	return nil
}

// abort ends the GPU's judgement early: on a call that did not return
// (what was found before it still counts), or on a lost GPU.
func (v *gpuVerdict) abort(err error, start time.Time) []check.Result {
	switch {
	case errors.Is(err, errGPUGone):
		return v.problems
	case errors.Is(err, ErrHung):
		return append(v.problems, Hung(v.g.Component(), v.g.IDs(), start))
	}
	return append(v.problems, Result(v.g, check.Error, check.ActionNone, "%v", err))
}

func (v *gpuVerdict) results() []check.Result {
	out := v.problems
	if len(out) == 0 && len(v.ok) > 0 {
		out = append(out, Result(v.g, check.OK, check.ActionNone, "%s", strings.Join(v.ok, "; ")))
	}
	if len(v.skipped) > 0 {
		out = append(out, Result(v.g, check.Skip, check.ActionNone, "%s", strings.Join(v.skipped, "; ")))
	}
	if len(out) == 0 {
		out = append(out, Result(v.g, check.Skip, check.ActionNone, "nothing to judge"))
	}
	return out
}
