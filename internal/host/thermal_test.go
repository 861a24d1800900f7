package host

import (
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// healthyThermal is every sensor of testdata/thermal/node as OK.
func healthyThermal() map[string]want {
	ok := want{Status: check.OK}
	return map[string]want{
		"nvme/Composite":             {check.OK, "38.9°C < sensor crit limit 84.8°C"},
		"nvme/Sensor 1":              {check.OK, "38.9°C < fail limit 95.0°C"},
		"cpu0":                       ok,
		"cpu1":                       ok,
		"coretemp[hwmon1]/Core 0":    ok,
		"coretemp[hwmon1]/Core 1":    ok,
		"coretemp[hwmon2]/Core 0":    ok,
		"coretemp[hwmon2]/Core 1":    ok,
		"mlx5/asic":                  ok,
		"thermal_zone0/x86_pkg_temp": ok,
		"thermal_zone1/acpitz":       ok,
	}
}

// with returns the healthy map with some components changed or, for a
// zero want, removed.
func with(base map[string]want, changes map[string]want) map[string]want {
	for k, v := range changes {
		if v == (want{}) {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	return base
}

func TestThermal(t *testing.T) {
	const hw = "sys/class/hwmon/"
	limits := config.Thermal{WarnCelsius: 85, FailCelsius: 95, UseSensorLimits: true}
	noSensorLimits := limits
	noSensorLimits.UseSensorLimits = false
	tests := []struct {
		name      string
		fixture   string
		overrides map[string]string
		cfg       config.Thermal
		want      map[string]want
	}{
		{"healthy", "thermal/node", nil, limits, healthyThermal()},
		{"over fail limit drains", "thermal/node",
			map[string]string{hw + "hwmon1/temp1_input": "97000\n"}, limits,
			with(healthyThermal(), map[string]want{"cpu0": {check.Fail, "package 97.0°C >= fail limit 95.0°C"}})},
		{"exactly at fail limit drains", "thermal/node",
			map[string]string{hw + "hwmon3/temp1_input": "95000\n"}, limits,
			with(healthyThermal(), map[string]want{"mlx5/asic": {check.Fail, "95.0°C >= fail limit 95.0°C"}})},
		{"over warn limit warns", "thermal/node",
			map[string]string{hw + "hwmon2/temp1_input": "87000\n"}, limits,
			with(healthyThermal(), map[string]want{"cpu1": {check.Warn, "package 87.0°C >= warn limit 85.0°C"}})},
		{"over the sensor's own crit drains", "thermal/node",
			map[string]string{hw + "hwmon0/temp1_input": "85850\n"}, limits,
			with(healthyThermal(), map[string]want{"nvme/Composite": {check.Fail, "85.8°C >= sensor crit limit 84.8°C"}})},
		{"sensor crit ignored when not asked", "thermal/node",
			map[string]string{hw + "hwmon0/temp1_input": "85850\n"}, noSensorLimits,
			with(healthyThermal(), map[string]want{
				"nvme/Composite": {check.Warn, "85.8°C >= warn limit 85.0°C"},
				"nvme/Sensor 1":  {check.OK, "fail limit 95.0°C"}})},
		{"zone over its critical trip drains", "thermal/node",
			map[string]string{"sys/class/thermal/thermal_zone1/trip_point_0_temp": "90000\n",
				"sys/class/thermal/thermal_zone1/temp": "91000\n"}, limits,
			with(healthyThermal(), map[string]want{"thermal_zone1/acpitz": {check.Fail, "91.0°C >= sensor crit limit 90.0°C"}})},
		{"junk sensor crit is not trusted", "thermal/node",
			map[string]string{hw + "hwmon3/temp1_crit": "20000\n"}, limits,
			with(healthyThermal(), map[string]want{"mlx5/asic": {check.OK, "52.0°C < fail limit 95.0°C"}})},
		{"absurdly cold reading only warns", "thermal/node",
			map[string]string{hw + "hwmon0/temp2_input": "-273150\n"}, limits,
			with(healthyThermal(), map[string]want{"nvme/Sensor 1": {check.Warn, "implausible reading -273.1°C"}})},
		{"absurdly hot reading only warns", "thermal/node",
			map[string]string{hw + "hwmon1/temp1_input": "255000\n"}, limits,
			with(healthyThermal(), map[string]want{"cpu0": {check.Warn, "implausible reading 255.0°C"}})},
		{"garbage reading cannot be checked", "thermal/node",
			map[string]string{"sys/class/thermal/thermal_zone0/temp": "\x01\xffgarbage\n"}, limits,
			with(healthyThermal(), map[string]want{"thermal_zone0/x86_pkg_temp": {check.Error, `reading "\x01\xffgarbage" is not a number`}})},
		{"empty reading cannot be checked", "thermal/node",
			map[string]string{hw + "hwmon3/temp1_input": "\n"}, limits,
			with(healthyThermal(), map[string]want{"mlx5/asic": {check.Error, `reading "" is not a number`}})},
		{"unreadable input is an error", "thermal/node",
			map[string]string{hw + "hwmon3/temp1_input": asDir}, limits,
			with(healthyThermal(), map[string]want{"mlx5/asic": {check.Error, "temp1_input: is a directory"}})},
		{"excluded hwmon name is not judged", "thermal/node",
			map[string]string{hw + "hwmon3/temp1_input": "99000\n"},
			config.Thermal{WarnCelsius: 85, FailCelsius: 95, Exclude: []string{"mlx5"}},
			with(healthyThermal(), map[string]want{"mlx5/asic": {}, "nvme/Composite": {check.OK, "fail limit"}})},
		{"excluded component glob is not judged", "thermal/node",
			map[string]string{hw + "hwmon1/temp2_input": "99000\n"},
			config.Thermal{WarnCelsius: 85, FailCelsius: 95, Exclude: []string{"coretemp*/Core *", "acpitz"}},
			with(healthyThermal(), map[string]want{
				"coretemp[hwmon1]/Core 0": {}, "coretemp[hwmon1]/Core 1": {},
				"coretemp[hwmon2]/Core 0": {}, "coretemp[hwmon2]/Core 1": {},
				"thermal_zone1/acpitz": {}, "nvme/Composite": {check.OK, "fail limit"}})},
		{"bad exclude pattern is an error", "thermal/node", nil,
			config.Thermal{FailCelsius: 95, Exclude: []string{"[mlx5"}},
			map[string]want{"host": {check.Error, "bad exclude pattern"}}},
		{"everything excluded skips", "thermal/node", nil,
			config.Thermal{FailCelsius: 95, Exclude: []string{"*"}},
			map[string]want{"host": {check.Skip, "all 11 temperature sensors excluded"}}},
		{"no sensors skips", "", nil, limits,
			map[string]want{"host": {check.Skip, "no temperature sensors found"}}},
		{"hwmon outside any device is not named after a stray RDMA device", "thermal/node",
			map[string]string{"sys/class/infiniband/mlx5_0/fw_ver": "28.39.2048\n", "sys/class/driver": "\n"}, limits,
			healthyThermal()},
		{"old device/ layout is read", "thermal/legacy", nil, limits,
			map[string]want{"w83627ehf/temp1": {check.OK, "41.0°C"}}},
		{"unlistable hwmon class is an error", "thermal/node",
			map[string]string{"sys/class/hwmon": "not a dir\n"}, limits,
			map[string]want{"host": {check.Error, "list "}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := fixture(t, tc.fixture, tc.overrides)
			expect(t, nameThermal, run(t, NewThermal(root, tc.cfg)), tc.want)
		})
	}
}

func TestThermalHonoursContext(t *testing.T) {
	rs := NewThermal(fixture(t, "thermal/node", nil), config.Thermal{FailCelsius: 95}).Run(cancelled())
	expect(t, nameThermal, rs, map[string]want{"host": {check.Error, "interrupted"}})
}
