package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// kernelTree writes files (path → content) and relative symlinks (path →
// target) under a temp root, laid out as the kernel lays out /sys.
func kernelTree(t *testing.T, files, links map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		mustMkdir(t, filepath.Dir(full))
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		full := filepath.Join(root, p)
		mustMkdir(t, filepath.Dir(full))
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// Device paths of the Intel node below, relative to root.
const (
	ct0  = "sys/devices/platform/coretemp.0/hwmon/hwmon1/"
	ct1  = "sys/devices/platform/coretemp.1/hwmon/hwmon2/"
	hca3 = "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0/"
	hcaX = "sys/devices/pci0000:a0/0000:a0:01.0/0000:a1:00.0/"
	pkgZ = "sys/devices/virtual/thermal/thermal_zone0/"
)

// intelNode is a two-socket Sapphire Rapids node with two ConnectX-7: one
// with its RDMA device (mlx5_3, with a cable module sensor), one whose
// RDMA device is missing (mlx5_ib not loaded), so only its PCI address is
// known.
func intelNode() (files, links map[string]string) {
	files = map[string]string{
		ct0 + "name": "coretemp\n", ct0 + "temp1_label": "Package id 0\n",
		ct0 + "temp1_input": "61000\n", ct0 + "temp1_crit": "100000\n", ct0 + "temp1_max": "90000\n",
		ct0 + "temp2_label": "Core 0\n", ct0 + "temp2_input": "58000\n", ct0 + "temp2_crit": "100000\n",
		ct1 + "name": "coretemp\n", ct1 + "temp1_label": "Package id 1\n",
		ct1 + "temp1_input": "63000\n", ct1 + "temp1_crit": "100000\n",
		ct1 + "temp2_label": "Core 0\n", ct1 + "temp2_input": "60000\n", ct1 + "temp2_crit": "100000\n",

		hca3 + "vendor": "0x15b3\n", hca3 + "infiniband/mlx5_3/fw_ver": "28.39.2048\n",
		hca3 + "hwmon/hwmon3/name":        "mlx5\n",
		hca3 + "hwmon/hwmon3/temp1_label": "asic\n", hca3 + "hwmon/hwmon3/temp1_input": "68000\n",
		hca3 + "hwmon/hwmon3/temp1_crit": "105000\n", hca3 + "hwmon/hwmon3/temp1_highest": "71000\n",
		hca3 + "hwmon/hwmon3/temp2_label": "module0\n", hca3 + "hwmon/hwmon3/temp2_input": "47000\n",
		hca3 + "hwmon/hwmon3/temp2_crit": "75000\n",

		hcaX + "vendor":                   "0x15b3\n",
		hcaX + "hwmon/hwmon4/name":        "mlx5\n",
		hcaX + "hwmon/hwmon4/temp1_label": "asic\n", hcaX + "hwmon/hwmon4/temp1_input": "66000\n",
		hcaX + "hwmon/hwmon4/temp1_crit": "105000\n",

		pkgZ + "type": "x86_pkg_temp\n", pkgZ + "temp": "61000\n",
		pkgZ + "trip_point_0_type": "passive\n", pkgZ + "trip_point_0_temp": "0\n",

		"sys/bus/pci/drivers/mlx5_core/bind": "",
	}
	links = map[string]string{
		ct0 + "device":                    "../../../coretemp.0",
		ct1 + "device":                    "../../../coretemp.1",
		hca3 + "hwmon/hwmon3/device":      "../../../0000:19:00.0",
		hca3 + "driver":                   "../../../../../../bus/pci/drivers/mlx5_core",
		hcaX + "hwmon/hwmon4/device":      "../../../0000:a1:00.0",
		hcaX + "driver":                   "../../../../bus/pci/drivers/mlx5_core",
		"sys/class/hwmon/hwmon1":          "../../devices/platform/coretemp.0/hwmon/hwmon1",
		"sys/class/hwmon/hwmon2":          "../../devices/platform/coretemp.1/hwmon/hwmon2",
		"sys/class/hwmon/hwmon3":          "../../" + strings.TrimPrefix(hca3, "sys/") + "hwmon/hwmon3",
		"sys/class/hwmon/hwmon4":          "../../" + strings.TrimPrefix(hcaX, "sys/") + "hwmon/hwmon4",
		"sys/class/thermal/thermal_zone0": "../../devices/virtual/thermal/thermal_zone0",
	}
	return files, links
}

func healthyIntel() map[string]want {
	return map[string]want{
		"cpu0":                       {check.OK, "package 61.0°C < fail limit 100.0°C"},
		"cpu1":                       {check.OK, "package 63.0°C < fail limit 100.0°C"},
		"coretemp[hwmon1]/Core 0":    {check.OK, "58.0°C < fail limit 100.0°C"},
		"coretemp[hwmon2]/Core 0":    {check.OK, "60.0°C < fail limit 100.0°C"},
		"mlx5_3":                     {check.OK, "asic 68.0°C < fail limit 105.0°C"},
		"mlx5_3/module0":             {check.OK, "47.0°C < sensor crit limit 75.0°C"},
		"0000:a1:00.0":               {check.OK, "asic 66.0°C < fail limit 105.0°C"},
		"thermal_zone0/x86_pkg_temp": {check.OK, "61.0°C < fail limit 100.0°C"},
	}
}

func TestThermalClasses(t *testing.T) {
	def := config.Default().Checks.Thermal
	general := def
	general.CPUWarnCelsius, general.CPUFailCelsius, general.HCAWarnCelsius, general.HCAFailCelsius = 0, 0, 0, 0
	noSensorLimits := def
	noSensorLimits.UseSensorLimits = false
	excl := def
	excl.Exclude = []string{"cpu*", "mlx5_3", "mlx5_3/*"}
	const h3 = hca3 + "hwmon/hwmon3/"
	tests := []struct {
		name  string
		files map[string]string // changes to intelNode; "" removes
		cfg   config.Thermal
		want  map[string]want
	}{
		{"healthy node is all OK", nil, def, healthyIntel()},
		{"hot CPU package warns", map[string]string{ct1 + "temp1_input": "92000\n"}, def,
			with(healthyIntel(), map[string]want{"cpu1": {check.Warn, "package 92.0°C >= warn limit 90.0°C"}})},
		{"CPU package at the CPU fail limit drains", map[string]string{ct0 + "temp1_input": "100000\n"}, def,
			with(healthyIntel(), map[string]want{"cpu0": {check.Fail, "package 100.0°C >= fail limit 100.0°C"}})},
		{"CPU package at its own TjMax drains", map[string]string{ct0 + "temp1_crit": "94000\n", ct0 + "temp1_input": "94000\n"}, def,
			with(healthyIntel(), map[string]want{"cpu0": {check.Fail, "package 94.0°C >= sensor crit limit 94.0°C"}})},
		{"CPU limits replace the general ones", map[string]string{ct0 + "temp1_input": "96000\n", pkgZ + "temp": "96000\n"}, def,
			with(healthyIntel(), map[string]want{
				"cpu0":                       {check.Warn, "package 96.0°C >= warn limit 90.0°C"},
				"thermal_zone0/x86_pkg_temp": {check.Warn, "96.0°C >= warn limit 90.0°C"}})},
		{"CPU limits of 0 take the general ones", map[string]string{ct0 + "temp1_input": "96000\n", pkgZ + "temp": "86000\n"}, general,
			with(healthyIntel(), map[string]want{
				"cpu0":                       {check.Fail, "package 96.0°C >= fail limit 95.0°C"},
				"cpu1":                       {check.OK, "fail limit 95.0°C"},
				"coretemp[hwmon1]/Core 0":    {check.OK, "fail limit 95.0°C"},
				"coretemp[hwmon2]/Core 0":    {check.OK, "fail limit 95.0°C"},
				"mlx5_3":                     {check.OK, "asic 68.0°C < fail limit 95.0°C"},
				"0000:a1:00.0":               {check.OK, "fail limit 95.0°C"},
				"thermal_zone0/x86_pkg_temp": {check.Warn, "86.0°C >= warn limit 85.0°C"}})},
		{"hot core drains with the CPU limits", map[string]string{ct1 + "temp2_input": "100000\n"}, def,
			with(healthyIntel(), map[string]want{"coretemp[hwmon2]/Core 0": {check.Fail, "100.0°C >= fail limit 100.0°C"}})},
		{"hot HCA warns", map[string]string{h3 + "temp1_input": "96000\n"}, def,
			with(healthyIntel(), map[string]want{"mlx5_3": {check.Warn, "asic 96.0°C >= warn limit 95.0°C"}})},
		{"HCA over the HCA fail limit drains", map[string]string{h3 + "temp1_input": "105500\n"}, def,
			with(healthyIntel(), map[string]want{"mlx5_3": {check.Fail, "asic 105.5°C >= fail limit 105.0°C"}})},
		{"HCA limits of 0 take the general ones", map[string]string{h3 + "temp1_input": "96000\n"}, general,
			with(healthyIntel(), map[string]want{
				"mlx5_3":                     {check.Fail, "asic 96.0°C >= fail limit 95.0°C"},
				"cpu0":                       {check.OK, "fail limit 95.0°C"},
				"cpu1":                       {check.OK, "fail limit 95.0°C"},
				"coretemp[hwmon1]/Core 0":    {check.OK, "fail limit 95.0°C"},
				"coretemp[hwmon2]/Core 0":    {check.OK, "fail limit 95.0°C"},
				"0000:a1:00.0":               {check.OK, "fail limit 95.0°C"},
				"thermal_zone0/x86_pkg_temp": {check.OK, "fail limit 95.0°C"}})},
		{"HCA over its own lower crit drains", map[string]string{h3 + "temp1_crit": "97000\n", h3 + "temp1_input": "98000\n"}, def,
			with(healthyIntel(), map[string]want{"mlx5_3": {check.Fail, "asic 98.0°C >= sensor crit limit 97.0°C"}})},
		{"HCA crit ignored when not asked", map[string]string{h3 + "temp1_crit": "97000\n", h3 + "temp1_input": "98000\n"}, noSensorLimits,
			with(healthyIntel(), map[string]want{
				"mlx5_3":         {check.Warn, "asic 98.0°C >= warn limit 95.0°C"},
				"mlx5_3/module0": {check.OK, "47.0°C < fail limit 105.0°C"}})},
		{"hot cable module drains at its crit", map[string]string{h3 + "temp2_input": "76000\n"}, def,
			with(healthyIntel(), map[string]want{"mlx5_3/module0": {check.Fail, "76.0°C >= sensor crit limit 75.0°C"}})},
		{"HCA without RDMA device is named by PCI address", map[string]string{hcaX + "hwmon/hwmon4/temp1_input": "106000\n"}, def,
			with(healthyIntel(), map[string]want{"0000:a1:00.0": {check.Fail, "asic 106.0°C >= fail limit 105.0°C"}})},
		{"nameless hwmon is an HCA by its driver", map[string]string{h3 + "name": "", h3 + "temp1_input": "96000\n"}, def,
			with(healthyIntel(), map[string]want{"mlx5_3": {check.Warn, "asic 96.0°C >= warn limit 95.0°C"}})},
		{"implausible HCA reading only warns", map[string]string{h3 + "temp1_input": "255000\n"}, def,
			with(healthyIntel(), map[string]want{"mlx5_3": {check.Warn, "implausible reading 255.0°C"}})},
		{"implausible CPU reading only warns", map[string]string{ct0 + "temp1_input": "-1000000\n"}, def,
			with(healthyIntel(), map[string]want{"cpu0": {check.Warn, "implausible reading -1000.0°C"}})},
		{"garbage HCA reading cannot be checked", map[string]string{h3 + "temp1_input": "N/A\n"}, def,
			with(healthyIntel(), map[string]want{"mlx5_3": {check.Error, `reading "N/A" is not a number`}})},
		{"garbage CPU reading cannot be checked", map[string]string{ct1 + "temp1_input": "0x5f\n"}, def,
			with(healthyIntel(), map[string]want{"cpu1": {check.Error, `reading "0x5f" is not a number`}})},
		{"excluded components are not judged", map[string]string{ct0 + "temp1_input": "120000\n", h3 + "temp1_input": "120000\n"}, excl,
			with(healthyIntel(), map[string]want{"cpu0": {}, "cpu1": {}, "mlx5_3": {}, "mlx5_3/module0": {}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files, links := intelNode()
			for p, v := range tc.files {
				if v == "" {
					delete(files, p)
				} else {
					files[p] = v
				}
			}
			root := kernelTree(t, files, links)
			expect(t, nameThermal, run(t, NewThermal(root, tc.cfg)), tc.want)
		})
	}
}

func TestThermalHCAResultsCarryThePCIAddress(t *testing.T) {
	files, links := intelNode()
	files[hca3+"hwmon/hwmon3/temp1_input"] = "110000\n"
	files[hca3+"hwmon/hwmon3/temp2_input"] = "garbage\n"
	rs := run(t, NewThermal(kernelTree(t, files, links), config.Default().Checks.Thermal))
	want := map[string]string{"mlx5_3": "0000:19:00.0", "mlx5_3/module0": "0000:19:00.0", "0000:a1:00.0": "0000:a1:00.0", "cpu0": ""}
	seen := 0
	for _, r := range rs {
		if w, ok := want[r.Component]; ok {
			seen++
			if r.IDs.PCIBusID != w {
				t.Errorf("%s (%v): PCI bus id %q, want %q", r.Component, r.Status, r.IDs.PCIBusID, w)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("saw %d of the %d components %v in %v", seen, len(want), want, rs)
	}
}

// Device paths of the AMD nodes below.
const (
	k0 = "sys/devices/pci0000:00/0000:00:18.3/hwmon/hwmon0/"
	k1 = "sys/devices/pci0000:00/0000:00:19.3/hwmon/hwmon1/"
)

// amdNode is a two-socket EPYC (DGX A100-like): k10temp per socket on the
// data fabric functions 00:18.3 and 00:19.3, Tctl and one CCD each.
func amdNodeTree(extra map[string]string) (files, links map[string]string) {
	files = map[string]string{
		k0 + "name": "k10temp\n", k0 + "temp1_label": "Tctl\n", k0 + "temp1_input": "55250\n",
		k0 + "temp3_label": "Tccd1\n", k0 + "temp3_input": "50000\n",
		k1 + "name": "k10temp\n", k1 + "temp1_label": "Tctl\n", k1 + "temp1_input": "57000\n",
		k1 + "temp3_label": "Tccd1\n", k1 + "temp3_input": "52000\n",
	}
	for p, v := range extra {
		files[p] = v
	}
	links = map[string]string{
		k0 + "device":            "../../../0000:00:18.3",
		k1 + "device":            "../../../0000:00:19.3",
		"sys/class/hwmon/hwmon0": "../../devices/pci0000:00/0000:00:18.3/hwmon/hwmon0",
		"sys/class/hwmon/hwmon1": "../../devices/pci0000:00/0000:00:19.3/hwmon/hwmon1",
	}
	return files, links
}

func TestThermalAMD(t *testing.T) {
	def := config.Default().Checks.Thermal
	healthy := func() map[string]want {
		return map[string]want{
			"cpu0":                  {check.OK, "Tctl 55.2°C < fail limit 100.0°C"},
			"cpu1":                  {check.OK, "Tctl 57.0°C < fail limit 100.0°C"},
			"k10temp[hwmon0]/Tccd1": {check.OK, "50.0°C < fail limit 100.0°C"},
			"k10temp[hwmon1]/Tccd1": {check.OK, "52.0°C < fail limit 100.0°C"},
		}
	}
	tests := []struct {
		name  string
		extra map[string]string
		want  map[string]want
	}{
		{"healthy EPYC is all OK", nil, healthy()},
		{"hot socket warns", map[string]string{k1 + "temp1_input": "91000\n"},
			with(healthy(), map[string]want{"cpu1": {check.Warn, "Tctl 91.0°C >= warn limit 90.0°C"}})},
		{"socket at the CPU fail limit drains", map[string]string{k0 + "temp1_input": "100000\n"},
			with(healthy(), map[string]want{"cpu0": {check.Fail, "Tctl 100.0°C >= fail limit 100.0°C"}})},
		// Threadripper-style: Tctl runs 27 °C above the die; only Tdie counts.
		{"offset Tctl is not judged beside Tdie",
			map[string]string{k0 + "temp1_input": "99000\n", k0 + "temp2_label": "Tdie\n", k0 + "temp2_input": "72000\n"},
			with(healthy(), map[string]want{
				"cpu0":         {check.OK, "Tdie 72.0°C < fail limit 100.0°C"},
				"k10temp/Tctl": {check.OK, "control value 99.0°C, Tdie is judged instead"}})},
		{"hot Tdie drains beside Tctl",
			map[string]string{k0 + "temp1_input": "127000\n", k0 + "temp2_label": "Tdie\n", k0 + "temp2_input": "100000\n"},
			with(healthy(), map[string]want{
				"cpu0":         {check.Fail, "Tdie 100.0°C >= fail limit 100.0°C"},
				"k10temp/Tctl": {check.OK, "control value 127.0°C"}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files, links := amdNodeTree(tc.extra)
			expect(t, nameThermal, run(t, NewThermal(kernelTree(t, files, links), def)), tc.want)
		})
	}
}

func TestAMDNode(t *testing.T) {
	for addr, want := range map[string]int{
		"0000:00:18.3": 0, "0000:00:19.3": 1, "0000:00:1f.3": 7,
		"0000:00:17.3": -1, "0000:00:20.3": -1, "0000:40:18.3": -1, "00:18.3": -1, "": -1,
	} {
		if got := amdNode(addr); got != want {
			t.Errorf("amdNode(%q) = %d, want %d", addr, got, want)
		}
	}
}
