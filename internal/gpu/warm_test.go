package gpu

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// slowInit is NVML starting without persistence mode: Init takes a while.
func slowInit(d time.Duration) *mock.Interface {
	return &mock.Interface{
		InitFunc:                   func() nvml.Return { time.Sleep(d); return nvml.SUCCESS },
		SystemGetDriverVersionFunc: func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return 0, nvml.SUCCESS },
	}
}

func TestWarmWaitsOutASlowStart(t *testing.T) {
	n := NewNode(slowInit(300*time.Millisecond), t.TempDir(), 0, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n.Warm(ctx)
	// A check with a timeout far shorter than the start-up now gets the
	// inventory at once instead of reporting a hang.
	cctx, ccancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer ccancel()
	if _, err := n.Inventory(cctx); errors.Is(err, ErrHung) {
		t.Fatalf("slow start reported as a hang: %v", err)
	}
}

func TestWarmGivesUpOnce(t *testing.T) {
	n := NewNode(slowInit(time.Hour), t.TempDir(), 0, "")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	n.Warm(ctx)
	start := time.Now()
	_, err := n.Inventory(context.Background()) // would block forever without gaveUp
	var h *HungError
	if !errors.As(err, &h) || time.Since(start) > 50*time.Millisecond {
		t.Fatalf("after the budget ran out: %v after %v", err, time.Since(start))
	}
	r := NodeResult(err, time.Now())
	if r.Message != "NVML did not answer in 0.1s" {
		t.Errorf("message %q should give the whole wait", r.Message)
	}
}
