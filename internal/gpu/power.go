package gpu

import (
	"context"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
)

type power struct{ node *Node }

// NewPower warns when a GPU's enforced power limit is below its default:
// someone (or something: a BMC, a site script, nvidia-smi -pl) capped it,
// and jobs run slower than on the node's peers.
func NewPower(n *Node) check.Check { return &power{node: n} }

func (c *power) Name() string { return "gpu.power" }

type powerLimits struct{ enforced, def uint32 } // milliwatts

func (c *power) Run(ctx context.Context) []check.Result {
	start := time.Now()
	return Each(ctx, c.node, func(ctx context.Context, g GPU) []check.Result {
		v := &gpuVerdict{g: g}
		l, ret, err := Call(ctx, func() (powerLimits, nvml.Return) {
			var l powerLimits
			var ret nvml.Return
			if l.enforced, ret = g.Device.GetEnforcedPowerLimit(); ret != nvml.SUCCESS {
				return l, ret
			}
			l.def, ret = g.Device.GetPowerManagementDefaultLimit()
			return l, ret
		})
		switch {
		case err != nil:
			return v.abort(err, start)
		case Unsupported(ret):
			v.skip("power limits not reported")
		case ret != nvml.SUCCESS:
			v.nvmlErr("nvmlDeviceGetEnforcedPowerLimit", ret)
		default:
			judgePower(v, l)
		}
		return v.results()
	})
}

// judgePower compares whole watts, rounded: NVML's milliwatts differ by a
// few between boards of one model without anyone having set anything.
func judgePower(v *gpuVerdict, l powerLimits) {
	enforced, def := (l.enforced+500)/1000, (l.def+500)/1000
	if enforced < def {
		v.warn("power capped at %d W < default %d W", enforced, def)
		return
	}
	v.pass("power limit %d W, default %d W", enforced, def)
}
