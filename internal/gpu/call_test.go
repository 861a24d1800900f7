package gpu

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
)

func TestCallAnswers(t *testing.T) {
	v, ret, err := Call(context.Background(), func() (int, nvml.Return) { return 7, nvml.ERROR_NOT_SUPPORTED })
	if v != 7 || ret != nvml.ERROR_NOT_SUPPORTED || err != nil {
		t.Errorf("got %d %v %v", v, ret, err)
	}
}

func TestCallHung(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := Call(ctx, func() (string, nvml.Return) { <-block; return "late", nvml.SUCCESS })
	if !errors.Is(err, ErrHung) {
		t.Fatalf("err %v, want ErrHung", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Call returned after %v, well past its deadline", d)
	}
}

func TestUnsupportedAndLost(t *testing.T) {
	if !Unsupported(nvml.ERROR_NOT_SUPPORTED) || !Unsupported(nvml.ERROR_FUNCTION_NOT_FOUND) || Unsupported(nvml.ERROR_UNKNOWN) {
		t.Error("Unsupported")
	}
	if !Lost(nvml.ERROR_GPU_IS_LOST) || !Lost(nvml.ERROR_RESET_REQUIRED) || Lost(nvml.ERROR_NOT_SUPPORTED) {
		t.Error("Lost")
	}
}

func TestNodeResult(t *testing.T) {
	start := time.Now()
	for _, tc := range []struct {
		err    error
		status check.Status
		msg    string
	}{
		{ErrNoGPUs, check.Skip, "no NVIDIA GPU on this node"},
		{ErrHung, check.Fail, "NVML did not answer in "},
		{&NVMLError{Op: "nvmlInit", Ret: nvml.ERROR_DRIVER_NOT_LOADED}, check.Error, "NVML unavailable (see gpu.driver): nvmlInit: "},
	} {
		r := NodeResult(tc.err, start)
		if r.Status != tc.status || !strings.HasPrefix(r.Message, tc.msg) || r.Component != "host" {
			t.Errorf("%v: %+v", tc.err, r)
		}
	}
}

func TestEachVisitsAndStopsOnHang(t *testing.T) {
	lib := baseFakeLib(3, nil)
	n := NewNode(lib, t.TempDir(), -1, "")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	block := make(chan struct{})
	defer close(block)
	var visited []int
	rs := Each(ctx, n, func(ctx context.Context, g GPU) []check.Result {
		visited = append(visited, g.Index)
		if g.Index == 1 {
			if _, _, err := Call(ctx, func() (int, nvml.Return) { <-block; return 0, nvml.SUCCESS }); err != nil {
				return []check.Result{Hung(g.Component(), g.IDs(), time.Now())}
			}
		}
		return []check.Result{Result(g, check.OK, check.ActionNone, "fine")}
	})
	if len(visited) != 2 || len(rs) != 2 || rs[1].Status != check.Fail || rs[1].Component != "gpu1" || rs[1].IDs.Serial != "S1" {
		t.Errorf("visited %v, results %+v", visited, rs)
	}
}
