package gpu

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
)

// Call runs one NVML call under ctx. NVML can block for minutes on a sick
// GPU; if ctx ends first the call is abandoned (its goroutine ends when
// NVML returns or the process exits) and ErrHung comes back.
func Call[T any](ctx context.Context, f func() (T, nvml.Return)) (T, nvml.Return, error) {
	type answer struct {
		v   T
		ret nvml.Return
	}
	ch := make(chan answer, 1)
	go func() {
		v, ret := f()
		ch <- answer{v, ret}
	}()
	select {
	case a := <-ch:
		return a.v, a.ret, nil
	case <-ctx.Done():
		var zero T
		return zero, nvml.ERROR_UNKNOWN, ErrHung
	}
}

// Unsupported reports NVML's answers that mean "this GPU has no such
// feature": a SKIP, never a FAIL (PCIe SKUs have no NVLink or fabric).
func Unsupported(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND
}

// Lost reports NVML's answers that mean the GPU itself is gone.
func Lost(ret nvml.Return) bool {
	return ret == nvml.ERROR_GPU_IS_LOST || ret == nvml.ERROR_RESET_REQUIRED
}

// PerGPU is one check's work on one GPU.
type PerGPU func(ctx context.Context, g GPU) []check.Result

// Each runs fn for every GPU of the inventory, under a deadline a little
// earlier than the check's own, and turns the node-level outcomes into
// results: SKIP without GPUs, ERROR without NVML (gpu.driver carries the
// FAIL), FAIL "NVML did not answer in Ns" for a hang. GPUs are visited one
// after another: NVML serialises most calls anyway, and a hang on one GPU
// usually means the next call hangs too.
func Each(ctx context.Context, n *Node, fn PerGPU) []check.Result {
	ctx, cancel := check.FinishEarly(ctx)
	defer cancel()
	start := time.Now()
	inv, err := n.Inventory(ctx)
	if err != nil {
		return []check.Result{NodeResult(err, start)}
	}
	var out []check.Result
	for _, g := range inv.GPUs {
		rs := fn(ctx, g)
		out = append(out, rs...)
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

// NodeResult reports a node-level failure to reach NVML.
func NodeResult(err error, start time.Time) check.Result {
	switch {
	case errors.Is(err, ErrNoGPUs):
		return check.Result{Component: "host", Status: check.Skip, Message: "no NVIDIA GPU on this node"}
	case errors.Is(err, ErrHung):
		var h *HungError
		if errors.As(err, &h) && !h.Since.IsZero() {
			start = h.Since
		}
		return Hung("host", check.IDs{}, start)
	}
	return check.Result{Component: "host", Status: check.Error, Message: "NVML unavailable (see gpu.driver): " + err.Error()}
}

// Hung is the FAIL for an NVML call that did not return.
func Hung(component string, ids check.IDs, start time.Time) check.Result {
	secs := time.Since(start).Round(100 * time.Millisecond).Seconds()
	return check.Result{Component: component, IDs: ids, Status: check.Fail, Action: check.ActionReboot,
		Message: fmt.Sprintf("NVML did not answer in %gs", secs)}
}

// Result builds a result about g.
func Result(g GPU, st check.Status, act check.Action, format string, a ...any) check.Result {
	return check.Result{Component: g.Component(), IDs: g.IDs(), Status: st, Action: act, Message: fmt.Sprintf(format, a...)}
}
