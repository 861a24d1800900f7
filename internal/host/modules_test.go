package host

import (
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

func TestModules(t *testing.T) {
	healthy := []string{"nvidia", "nvidia-uvm", "nvidia_peermem", "mlx5_core", "nvme_core", "crc32c-generic"}
	healthyWant := map[string]want{
		"nvidia":         {check.OK, "loaded"},
		"nvidia-uvm":     {check.OK, "loaded"},
		"nvidia_peermem": {check.OK, "loaded"},
		"mlx5_core":      {check.OK, "loaded"},
		"nvme_core":      {check.OK, "built into the kernel"}, // /sys/module only
		"crc32c-generic": {check.OK, "built into the kernel"}, // modules.builtin only
	}
	tests := []struct {
		name      string
		overrides map[string]string
		required  []string
		want      map[string]want
	}{
		{"healthy", nil, healthy, healthyWant},
		{"missing module drains", nil, []string{"nvidia", "nvidia_fs", "gdrdrv"}, map[string]want{
			"nvidia":    {check.OK, "loaded"},
			"nvidia_fs": {check.Fail, "not loaded"},
			"gdrdrv":    {check.Fail, "not loaded"},
		}},
		{"unloaded module whose name prefixes a loaded one", nil, []string{"nvidia_u", "mlx5"}, map[string]want{
			"nvidia_u": {check.Fail, "not loaded"},
			"mlx5":     {check.Fail, "not loaded"},
		}},
		{"without /proc/modules built-ins still count", map[string]string{"proc/modules": remove},
			[]string{"nvme_core", "crc32c_generic"}, map[string]want{
				"nvme_core":      {check.OK, "built into the kernel"},
				"crc32c_generic": {check.OK, "built into the kernel"},
			}},
		{"without /proc/modules the rest is an error, not a drain", map[string]string{"proc/modules": remove},
			[]string{"nvidia_peermem"}, map[string]want{
				"nvidia_peermem": {check.Error, "cannot tell if loaded: read "},
			}},
		{"garbage /proc/modules is an error, not a drain",
			map[string]string{"proc/modules": "nvidia 1 0 - Live 0x0\n\x7fELF\x02\x01\n"},
			[]string{"nvidia_peermem", "nvidia", "nvme_core"}, map[string]want{
				"nvidia_peermem": {check.Error, "line 2: not a module line"},
				"nvidia":         {check.OK, "loaded"}, // from /sys/module/nvidia/initstate
				"nvme_core":      {check.OK, "built into the kernel"},
			}},
		{"bad name in config is an error", nil, []string{"../nvidia"}, map[string]want{
			"../nvidia": {check.Error, "bad module name"},
		}},
		{"nothing required skips", nil, nil, map[string]want{
			"host": {check.Skip, "no required modules configured"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := fixture(t, "modules/node", tc.overrides)
			rs := run(t, NewModules(root, config.Modules{Required: tc.required}))
			expect(t, nameModules, rs, tc.want)
		})
	}
}

func TestModulesHonoursContext(t *testing.T) {
	rs := NewModules(fixture(t, "modules/node", nil), config.Modules{Required: []string{"nvidia"}}).Run(cancelled())
	expect(t, nameModules, rs, map[string]want{"host": {check.Error, "interrupted"}})
}
