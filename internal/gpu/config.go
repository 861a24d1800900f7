package gpu

import (
	"context"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

type gpuConfig struct {
	node *Node
	cfg  config.GPUConfig
}

// NewConfig checks the GPU settings jobs rely on: persistence mode (off,
// the driver tears the GPU down between jobs and every job start pays for
// it), MIG mode and compute mode, each against what the site wants.
func NewConfig(n *Node, c config.GPUConfig) check.Check { return &gpuConfig{node: n, cfg: c} }

func (c *gpuConfig) Name() string { return "gpu.config" }

func (c *gpuConfig) Run(ctx context.Context) []check.Result {
	if c.cfg.Persistence == "off" && c.cfg.MIG == "any" && c.cfg.ComputeMode == "any" {
		return []check.Result{{Component: "host", Status: check.Skip, Action: check.ActionNone,
			Message: "nothing to check: persistence off, mig and compute_mode any"}}
	}
	start := time.Now()
	return Each(ctx, c.node, func(ctx context.Context, g GPU) []check.Result {
		v := &gpuVerdict{g: g}
		for _, part := range []func(context.Context, *gpuVerdict) error{c.persistence, c.mig, c.computeMode} {
			if err := part(ctx, v); err != nil {
				return v.abort(err, start)
			}
		}
		return v.results()
	})
}

func (c *gpuConfig) persistence(ctx context.Context, v *gpuVerdict) error {
	if c.cfg.Persistence == "off" {
		return nil
	}
	mode, ret, err := Call(ctx, v.g.Device.GetPersistenceMode)
	switch {
	case err != nil:
		return err
	case Unsupported(ret):
		v.skip("persistence mode not supported")
	case ret != nvml.SUCCESS:
		return v.nvmlErr("nvmlDeviceGetPersistenceMode", ret)
	case mode == nvml.FEATURE_ENABLED:
		v.pass("persistence mode on")
	case c.cfg.Persistence == "fail":
		v.fail(check.ActionDrain, "persistence mode off")
	default:
		v.warn("persistence mode off")
	}
	return nil
}

type migModes struct{ current, pending int }

func (c *gpuConfig) mig(ctx context.Context, v *gpuVerdict) error {
	if c.cfg.MIG == "any" {
		return nil
	}
	m, ret, err := Call(ctx, func() (migModes, nvml.Return) {
		cur, pending, ret := v.g.Device.GetMigMode()
		return migModes{cur, pending}, ret
	})
	if err != nil {
		return err
	}
	want := c.cfg.MIG == "enabled"
	switch {
	case Unsupported(ret) && !want:
		v.pass("MIG not supported")
	case Unsupported(ret):
		v.fail(check.ActionDrain, "MIG not supported, want enabled")
	case ret != nvml.SUCCESS:
		return v.nvmlErr("nvmlDeviceGetMigMode", ret)
	case (m.current == nvml.DEVICE_MIG_ENABLE) == want:
		v.pass("MIG %s", migWord(m.current))
	case m.pending != m.current:
		v.fail(check.ActionDrain, "MIG %s (%s after GPU reset), want %s", migWord(m.current), migWord(m.pending), c.cfg.MIG)
	default:
		v.fail(check.ActionDrain, "MIG %s, want %s", migWord(m.current), c.cfg.MIG)
	}
	return nil
}

func migWord(mode int) string {
	if mode == nvml.DEVICE_MIG_ENABLE {
		return "enabled"
	}
	return "disabled"
}

// computeModes names NVML's compute modes as the configuration does.
var computeModes = map[nvml.ComputeMode]string{
	nvml.COMPUTEMODE_DEFAULT:           "default",
	nvml.COMPUTEMODE_EXCLUSIVE_THREAD:  "exclusive_thread",
	nvml.COMPUTEMODE_PROHIBITED:        "prohibited",
	nvml.COMPUTEMODE_EXCLUSIVE_PROCESS: "exclusive_process",
}

func (c *gpuConfig) computeMode(ctx context.Context, v *gpuVerdict) error {
	if c.cfg.ComputeMode == "any" {
		return nil
	}
	mode, ret, err := Call(ctx, v.g.Device.GetComputeMode)
	name, known := computeModes[mode]
	if !known {
		name = "unknown"
	}
	switch {
	case err != nil:
		return err
	case Unsupported(ret):
		v.skip("compute mode not supported")
	case ret != nvml.SUCCESS:
		return v.nvmlErr("nvmlDeviceGetComputeMode", ret)
	case name == c.cfg.ComputeMode:
		v.pass("compute mode %s", name)
	default:
		v.fail(check.ActionDrain, "compute mode %s, want %s", name, c.cfg.ComputeMode)
	}
	return nil
}
