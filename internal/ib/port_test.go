package ib

import (
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/pciaddr"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// h100Config is what gpuhc-healthcheck --print-inventory gives a DGX H100
// with its management NIC excluded.
func h100Config() config.IB {
	c := defaults()
	c.Exclude = []string{"mlx5_8"}
	c.Port.ExpectedHCAs = 8
	c.Port.ExpectedActivePorts = 8
	c.Port.MinRateGbps = 400
	c.Port.LinkLayer = "InfiniBand"
	c.Port.Firmware = "28.39.2048"
	c.Port.Inactive = "fail"
	return c
}

func TestPortHealthy(t *testing.T) {
	a100 := defaults()
	a100.Port.ExpectedHCAs, a100.Port.ExpectedActivePorts = 8, 8
	a100.Port.MinRateGbps, a100.Port.LinkLayer, a100.Port.Firmware = 200, "InfiniBand", "20.39.1002"
	a100.Port.Inactive = "fail"
	roce := defaults()
	roce.Port.ExpectedHCAs, roce.Port.ExpectedActivePorts = 4, 4
	roce.Port.MinRateGbps, roce.Port.LinkLayer, roce.Port.Firmware = 200, "Ethernet", "22.39.1002"
	roce.Port.Inactive = "fail"
	tests := []struct {
		tree string
		cfg  config.IB
		want map[string]want
	}{
		{sysfsfix.H100NDR, h100Config(), map[string]want{
			"host":     {check.OK, "8 HCAs, 8 of 8 ports active (1 excluded)"},
			"mlx5_0/1": {check.OK, "ACTIVE, 400 Gb/sec (4X NDR), InfiniBand"},
			"mlx5_0":   {check.OK, "firmware 28.39.2048"},
			"*":        {check.OK, ""},
		}},
		{sysfsfix.H100NDR, defaults(), map[string]want{
			"host":     {check.OK, "9 HCAs, 9 of 9 ports active"},
			"mlx5_8/1": {check.OK, "ACTIVE, 100 Gb/sec (4X EDR), Ethernet"},
			"*":        {check.OK, "ACTIVE"},
		}},
		{sysfsfix.A100HDR, a100, map[string]want{"host": {check.OK, "8 HCAs, 8 of 8 ports active"}, "*": {check.OK, ""}}},
		{sysfsfix.A100HDR, defaults(), map[string]want{"*": {check.OK, ""}}},
		{sysfsfix.RoCE, roce, map[string]want{"host": {check.OK, "4 HCAs, 4 of 4 ports active"}, "mlx5_3/1": {check.OK, "Ethernet"}, "*": {check.OK, ""}}},
		{sysfsfix.RoCE, defaults(), map[string]want{"*": {check.OK, ""}}},
	}
	roots := map[string]string{}
	for _, tree := range trees {
		roots[tree] = sysfsfix.Tree(t, tree)
	}
	for _, tc := range tests {
		rs := run(t, NewPort(NewGather(roots[tc.tree]), tc.cfg))
		expect(t, namePort, rs, tc.want)
		n := 0
		for _, r := range rs {
			if r.Component != "host" && len(r.Component) > 6 {
				n++
			}
			if r.Component != "host" && !pciaddr.IsSysfs(r.IDs.PCIBusID) {
				t.Errorf("%s: no PCI address in %+v", tc.tree, r)
			}
		}
		if n == 0 {
			t.Errorf("%s: no port judged: %v", tc.tree, rs)
		}
	}
}

func TestPortFaults(t *testing.T) {
	p3 := sysfsfix.PortDir("mlx5_3", 1)
	warnOnly := h100Config()
	warnOnly.Port.Inactive = "warn"
	warnOnly.Port.ExpectedActivePorts = -1
	countOnly := warnOnly
	countOnly.Port.ExpectedActivePorts = 8
	wrongLayer := h100Config()
	wrongLayer.Port.LinkLayer = "Ethernet"
	wrongLayer.Port.Firmware = "" // so that "*" below is every port
	fwPin := h100Config()
	fwPin.Port.Firmware = "28.40.1000"
	noExclude := h100Config()
	noExclude.Exclude = nil
	tooMany := h100Config()
	tooMany.Port.ExpectedHCAs = 7
	tests := []struct {
		name  string
		cfg   config.IB
		fault func(t *testing.T, root string)
		want  map[string]want
	}{
		{"port DOWN", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Set(t, root, p3+"/state", "1: DOWN")
			sysfsfix.Set(t, root, p3+"/phys_state", "3: Disabled")
		}, map[string]want{
			"mlx5_3/1": {check.Fail, "state DOWN (phys Disabled)"},
			"host":     {check.Fail, "7 active ports, expected 8 (inactive: mlx5_3/1)"},
			"*":        {check.OK, ""},
		}},
		{"port Polling", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Set(t, root, p3+"/state", "1: DOWN")
			sysfsfix.Set(t, root, p3+"/phys_state", "2: Polling")
		}, map[string]want{
			"mlx5_3/1": {check.Fail, "state DOWN (phys Polling)"},
			"host":     {check.Fail, "7 active ports, expected 8"},
			"*":        {check.OK, ""},
		}},
		{"linked but not activated by the SM", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Set(t, root, p3+"/state", "2: INIT")
		}, map[string]want{
			"mlx5_3/1": {check.Fail, "state INIT (phys LinkUp)"},
			"host":     {check.Fail, "7 active ports, expected 8"},
			"*":        {check.OK, ""},
		}},
		{"inactive port only warns by default", warnOnly, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, p3+"/state", "1: DOWN")
			sysfsfix.Set(t, root, p3+"/phys_state", "2: Polling")
		}, map[string]want{
			"mlx5_3/1": {check.Warn, "state DOWN (phys Polling)"},
			"host":     {check.OK, "8 HCAs, 7 of 8 ports active"},
			"*":        {check.OK, ""},
		}},
		{"inactive port fails through expected_active_ports", countOnly, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, p3+"/state", "1: DOWN")
			sysfsfix.Set(t, root, p3+"/phys_state", "2: Polling")
		}, map[string]want{
			"mlx5_3/1": {check.Warn, "state DOWN (phys Polling)"},
			"host":     {check.Fail, "7 active ports, expected 8 (inactive: mlx5_3/1)"},
			"*":        {check.OK, ""},
		}},
		{"rate 200 where 400 expected", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Set(t, root, p3+"/rate", "200 Gb/sec (4X HDR)")
		}, map[string]want{
			"mlx5_3/1": {check.Fail, "rate 200 Gb/sec < expected 400"},
			"*":        {check.OK, ""},
		}},
		{"rate of a down port is not judged", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Set(t, root, p3+"/state", "1: DOWN")
			sysfsfix.Set(t, root, p3+"/phys_state", "2: Polling")
			sysfsfix.Set(t, root, p3+"/rate", "10 Gb/sec (4X SDR)")
		}, map[string]want{
			"mlx5_3/1": {check.Fail, "state DOWN (phys Polling)"},
			"host":     {check.Fail, "7 active ports"},
			"*":        {check.OK, ""},
		}},
		{"one HCA missing", h100Config(), func(t *testing.T, root string) {
			sysfsfix.RemoveHCA(t, root, "mlx5_3")
		}, map[string]want{
			"host": {check.Fail, "7 HCAs, expected 8 (missing: mlx5_3); 7 active ports, expected 8"},
			"*":    {check.OK, ""},
		}},
		{"last HCA missing cannot be named", noExclude, func(t *testing.T, root string) {
			sysfsfix.RemoveHCA(t, root, "mlx5_8")
		}, map[string]want{
			"host": {check.OK, "8 HCAs, 8 of 8 ports active"},
			"*":    {check.OK, ""},
		}},
		{"more HCAs than expected warns", tooMany, nil, map[string]want{
			"host": {check.Warn, "8 HCAs, expected 7"},
			"*":    {check.OK, ""},
		}},
		{"wrong link layer", wrongLayer, nil, map[string]want{
			"host": {check.OK, ""},
			"*":    {check.Fail, "link_layer InfiniBand, expected Ethernet"},
		}},
		{"firmware mismatch", fwPin, nil, map[string]want{
			"mlx5_0":   {check.Fail, "firmware 28.39.2048, expected 28.40.1000"},
			"mlx5_1":   {check.Fail, "firmware 28.39.2048, expected 28.40.1000"},
			"mlx5_2":   {check.Fail, "firmware 28.39.2048, expected 28.40.1000"},
			"mlx5_3":   {check.Fail, "firmware 28.39.2048, expected 28.40.1000"},
			"mlx5_4":   {check.Fail, "firmware 28.39.2048, expected 28.40.1000"},
			"mlx5_5":   {check.Fail, "firmware 28.39.2048, expected 28.40.1000"},
			"mlx5_6":   {check.Fail, "firmware 28.39.2048, expected 28.40.1000"},
			"mlx5_7":   {check.Fail, "firmware 28.39.2048, expected 28.40.1000"},
			"*":        {check.OK, ""},
			"mlx5_0/1": {check.OK, "ACTIVE"},
		}},
		{"one HCA's firmware differs", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Set(t, root, "sys/class/infiniband/mlx5_5/fw_ver", "28.37.1014")
		}, map[string]want{
			"mlx5_5": {check.Fail, "firmware 28.37.1014, expected 28.39.2048"},
			"*":      {check.OK, ""},
		}},
		{"unreadable firmware is an error", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Set(t, root, "sys/class/infiniband/mlx5_5/fw_ver", "\x00\x01")
		}, map[string]want{
			"mlx5_5": {check.Error, "cannot read fw_ver"},
			"*":      {check.OK, ""},
		}},
		{"excluded mlx5_8 is not judged", h100Config(), func(t *testing.T, root string) {
			d := sysfsfix.PortDir("mlx5_8", 1)
			sysfsfix.Set(t, root, d+"/state", "1: DOWN")
			sysfsfix.Set(t, root, d+"/phys_state", "2: Polling")
			sysfsfix.Set(t, root, "sys/class/infiniband/mlx5_8/fw_ver", "1.0")
		}, map[string]want{
			"host": {check.OK, "8 HCAs, 8 of 8 ports active (1 excluded)"},
			"*":    {check.OK, ""},
		}},
		{"excluded port is not judged", func() config.IB { c := h100Config(); c.Exclude = []string{"mlx5_8", "mlx5_3/1"}; return c }(),
			func(t *testing.T, root string) { sysfsfix.Set(t, root, p3+"/state", "1: DOWN") },
			map[string]want{
				"host": {check.Fail, "7 active ports, expected 8"}, // the count still says what is required
				"*":    {check.OK, ""},
			}},
		{"garbage state is an error, not a drain", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Set(t, root, p3+"/state", "\xff\xfe garbage")
		}, map[string]want{
			"mlx5_3/1": {check.Error, "not a port state"},
			"host":     {check.Error, "7 active ports, expected 8; 1 unreadable"},
			"*":        {check.OK, ""},
		}},
		// "Unreadable port directories count as zero ports" (issue 13):
		// the node drained with "7 active ports, expected 8".
		{"unlistable ports directory is an error, not a drain", h100Config(), func(t *testing.T, root string) {
			sysfsfix.UnlistPorts(t, root, "mlx5_3")
		}, map[string]want{
			"mlx5_3": {check.Error, "cannot list its ports: list ports"},
			"host":   {check.Error, "7 active ports, expected 8; the ports of mlx5_3 could not be listed"},
			"*":      {check.OK, ""},
		}},
		{"garbage rate is an error, not a drain", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Set(t, root, p3+"/rate", "-1 Gb/sec")
		}, map[string]want{
			"mlx5_3/1": {check.Error, "not a rate"},
			"*":        {check.OK, ""},
		}},
		{"missing link_layer is an error", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Remove(t, root, p3+"/link_layer")
		}, map[string]want{
			"mlx5_3/1": {check.Error, "no such file"},
			"*":        {check.OK, ""},
		}},
		{"phys_state the kernel has no name for is not up", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Set(t, root, p3+"/state", "1: DOWN")
			sysfsfix.Set(t, root, p3+"/phys_state", "0: <unknown>")
		}, map[string]want{
			"mlx5_3/1": {check.Fail, "state DOWN (phys <unknown>)"},
			"host":     {check.Fail, "7 active ports, expected 8 (inactive: mlx5_3/1)"},
			"*":        {check.OK, ""},
		}},
		// Inactive = "fail" and the firmware pin would fail the VFs' DOWN
		// port and garbage fw_ver if they were judged.
		{"virtual devices are neither judged nor counted", h100Config(), func(t *testing.T, root string) {
			addVF(t, root, "mlx5_0", "mlx5_9", 1)
			addSF(t, root, "mlx5_1", "mlx5_10", 0)
			for _, d := range []string{"mlx5_9", "mlx5_10"} {
				sysfsfix.Set(t, root, sysfsfix.PortDir(d, 1)+"/state", "1: DOWN")
				sysfsfix.Set(t, root, "sys/class/infiniband/"+d+"/fw_ver", "\x00")
			}
		}, map[string]want{
			"host": {check.OK, "8 HCAs, 8 of 8 ports active (1 excluded, 2 virtual not judged)"},
			"*":    {check.OK, ""},
		}},
		// ip-link(8) "vf N state enable" keeps a VF's port up while the
		// PF's link is down: the VFs must not make up the count.
		{"active VF ports do not hide a dead PF port", countOnly, func(t *testing.T, root string) {
			addVF(t, root, "mlx5_3", "mlx5_9", 1)
			addVF(t, root, "mlx5_3", "mlx5_10", 2)
			sysfsfix.Set(t, root, p3+"/state", "1: DOWN")
			sysfsfix.Set(t, root, p3+"/phys_state", "3: Disabled")
		}, map[string]want{
			"mlx5_3/1": {check.Warn, "state DOWN (phys Disabled)"},
			"host":     {check.Fail, "7 active ports, expected 8 (inactive: mlx5_3/1)"},
			"*":        {check.OK, ""},
		}},
		{"down port with garbage rate still fails", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Set(t, root, p3+"/state", "1: DOWN")
			sysfsfix.Set(t, root, p3+"/phys_state", "2: Polling")
			sysfsfix.Set(t, root, p3+"/rate", "Invalid argument")
		}, map[string]want{
			"mlx5_3/1": {check.Fail, "state DOWN (phys Polling); cannot read"},
			"host":     {check.Fail, "7 active ports"},
			"*":        {check.OK, ""},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := sysfsfix.Tree(t, sysfsfix.H100NDR)
			if tc.fault != nil {
				tc.fault(t, root)
			}
			expect(t, namePort, run(t, NewPort(NewGather(root), tc.cfg)), tc.want)
		})
	}
}

func TestPortNoDevices(t *testing.T) {
	want8 := defaults()
	want8.Port.ExpectedHCAs = 8
	wantPorts := defaults()
	wantPorts.Port.ExpectedActivePorts = 4
	none := defaults()
	none.Port.ExpectedHCAs = 0
	allExcluded := defaults()
	allExcluded.Exclude = []string{"mlx5_*"}
	physExcluded := defaults()
	physExcluded.Exclude = []string{"mlx5_[0-3]"}
	tests := []struct {
		name string
		tree string
		cfg  config.IB
		want map[string]want
	}{
		{"nothing expected", "", defaults(), map[string]want{"host": {check.Skip, "no RDMA devices"}}},
		{"none expected", "", none, map[string]want{"host": {check.Skip, "no RDMA devices"}}},
		{"HCAs expected", "", want8, map[string]want{"host": {check.Fail, "0 HCAs, expected 8"}}},
		{"ports expected", "", wantPorts, map[string]want{"host": {check.Fail, "0 active ports, expected 4"}}},
		{"all excluded", sysfsfix.RoCE, allExcluded, map[string]want{"host": {check.Skip, "no RDMA devices (4 excluded)"}}},
		{"only virtual devices left", "roce+vf", physExcluded, map[string]want{
			"host": {check.Skip, "no physical RDMA devices (4 excluded, 1 virtual not judged)"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			switch tc.tree {
			case "":
			case "roce+vf":
				root = sysfsfix.Tree(t, sysfsfix.RoCE)
				addVF(t, root, "mlx5_0", "mlx5_4", 1)
			default:
				root = sysfsfix.Tree(t, tc.tree)
			}
			expect(t, namePort, run(t, NewPort(NewGather(root), tc.cfg)), tc.want)
		})
	}
}

func TestPortHonoursContext(t *testing.T) {
	rs := NewPort(NewGather(sysfsfix.Tree(t, sysfsfix.RoCE)), defaults()).Run(cancelled())
	expect(t, namePort, rs, map[string]want{"host": {check.Error, "interrupted"}})
}

func TestPortDiscoveryError(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, classDir, "x")
	expect(t, namePort, run(t, NewPort(NewGather(root), defaults())), map[string]want{"host": {check.Error, "cannot list RDMA devices"}})
}
