package gpu

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

func TestConfig(t *testing.T) {
	def := config.Default().Checks.GPU.Config
	with := func(edit func(*config.GPUConfig)) func(*Node, statefile.Dir) check.Check {
		c := def
		edit(&c)
		return func(n *Node, _ statefile.Dir) check.Check { return NewConfig(n, c) }
	}
	strict := with(func(c *config.GPUConfig) { c.Persistence, c.MIG, c.ComputeMode = "fail", "disabled", "default" })
	mk := func(n *Node, _ statefile.Dir) check.Check { return NewConfig(n, def) }
	one := func(w ...hwWant) func(sim.Model) []hwWant { return func(sim.Model) []hwWant { return w } }
	hwTable(t, mk, []hwCase{
		{name: "healthy"},
		{name: "healthy strict", mk: strict},
		{name: "persistence off", inject: []string{"gpu2:persistence=off"}, want: one(hwWarn(2, "persistence mode off"))},
		{name: "persistence off fails", inject: []string{"gpu2:persistence=off"}, mk: strict,
			want: one(hwFail(2, check.ActionDrain, "persistence mode off"))},
		{name: "persistence not judged", inject: []string{"gpu2:persistence=off"},
			mk: with(func(c *config.GPUConfig) { c.Persistence, c.ComputeMode = "off", "default" })},
		{name: "mig any", inject: []string{"gpu4:mig=on"}},
		{name: "mig on", inject: []string{"gpu4:mig=on"}, mk: strict, want: one(hwFail(4, check.ActionDrain, "MIG enabled, want disabled"))},
		{name: "mig off", mk: with(func(c *config.GPUConfig) { c.MIG = "enabled" }), inject: []string{"gpu0:mig=on", "gpu1:mig=on"},
			want: func(m sim.Model) []hwWant {
				var w []hwWant
				for i := 2; i < 8; i++ {
					w = append(w, hwFail(i, check.ActionDrain, "MIG disabled, want enabled"))
				}
				return w
			}},
		{name: "mig pending", mk: strict, edit: func(_ *testing.T, m *sim.Machine) {
			hwDevice(m, 3).GetMigModeFunc = func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS }
		}, want: one(hwFail(3, check.ActionDrain, "MIG enabled (disabled after GPU reset), want disabled"))},
		{name: "compute mode any", inject: []string{"gpu7:compute-mode=exclusive_process"}},
		{name: "compute mode", inject: []string{"gpu7:compute-mode=exclusive_process"}, mk: strict,
			want: one(hwFail(7, check.ActionDrain, "compute mode exclusive_process, want default"))},
		{name: "compute mode wanted", inject: []string{"gpu7:compute-mode=prohibited"},
			mk: with(func(c *config.GPUConfig) { c.ComputeMode = "prohibited" }),
			want: func(m sim.Model) []hwWant {
				var w []hwWant
				for i := 0; i < 7; i++ {
					w = append(w, hwFail(i, check.ActionDrain, "compute mode default, want prohibited"))
				}
				return w
			}},
		{name: "not supported", mk: strict, edit: func(_ *testing.T, m *sim.Machine) {
			d := hwDevice(m, 5)
			d.GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
			d.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
			d.GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		}, want: one(hwSkip(5, "persistence mode not supported; compute mode not supported"))},
		{name: "lost", mk: strict, inject: []string{"gpu1:lost=late"}, want: one(hwError(1, "nvmlDeviceGetPersistenceMode: ERROR_GPU_IS_LOST"))},
		{name: "hang", mk: strict, inject: []string{"gpu6:hang=late"}, want: one(hwHung(6)), hang: true},
	})
}

func TestConfigNothingToCheck(t *testing.T) {
	c := config.Default().Checks.GPU.Config
	c.Persistence = "off"
	_, n := hwNode(t, "dgxh100", nil)
	got := hwRun(t, NewConfig(n, c))
	if len(got) != 1 || got[0].Status != check.Skip || got[0].Component != "host" {
		t.Fatalf("%+v", got)
	}
}
