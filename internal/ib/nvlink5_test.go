package ib

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/statefile"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// mgmtAddrs are the NVSwitch management functions of sysfsfix's b200.
var mgmtAddrs = []string{"0000:08:00.0", "0000:0a:00.0", "0000:88:00.0", "0000:8a:00.0"}

func b200Config() config.IB {
	c := defaults()
	c.Port.ExpectedHCAs, c.Port.ExpectedActivePorts = 8, 8
	c.Port.MinRateGbps, c.Port.LinkLayer, c.Port.Firmware = 400, "InfiniBand", "28.39.2048"
	c.Port.Inactive = "fail"
	return c
}

// The SW_MNG devices are set apart by discovery itself, so that no
// consumer counts them: they are mlx5 devices with IB ports like the
// HCAs, differing only in their VPD.
func TestScanSetsSwitchMgmtApart(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.B200)
	d, err := Scan(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	var hcas, mgmt []string
	for _, h := range d.HCAs {
		hcas = append(hcas, h.Name)
	}
	for _, h := range d.SwitchMgmt {
		mgmt = append(mgmt, h.PCIAddr)
	}
	if got := strings.Join(hcas, " "); got != "mlx5_0 mlx5_1 mlx5_2 mlx5_3 mlx5_4 mlx5_5 mlx5_6 mlx5_7" {
		t.Errorf("HCAs: %s", got)
	}
	if got := strings.Join(mgmt, " "); got != "0000:88:00.0 0000:8a:00.0 0000:08:00.0 0000:0a:00.0" {
		t.Errorf("management devices: %s", got)
	}
	if len(d.VPDErrs) != 0 {
		t.Errorf("VPD errors: %v", d.VPDErrs)
	}
	if got := hcaNames(t, root); len(got) != 8 {
		t.Errorf("Discover: %v", got)
	}
	// The other trees have none (the HCAs of h100-ndr have no vpd file;
	// those of b200 have one without the marker).
	for _, tree := range trees {
		d, err := Scan(context.Background(), sysfsfix.Tree(t, tree))
		if err != nil || len(d.SwitchMgmt) != 0 {
			t.Errorf("%s: %v %v", tree, d.SwitchMgmt, err)
		}
	}
}

// ib.port on an HGX B200 pinned for its 8 HCAs passes: the management
// devices are neither counted nor judged, and their numbers are no gap.
func TestPortB200(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.B200)
	expect(t, namePort, run(t, NewPort(NewGather(root), b200Config())), map[string]want{
		"host": {check.OK, "8 HCAs, 8 of 8 ports active (4 NVSwitch management devices, not HCAs)"},
		"*":    {check.OK, ""},
	})
	sysfsfix.RemoveHCA(t, root, "mlx5_3")
	expect(t, namePort, run(t, NewPort(NewGather(root), b200Config())), map[string]want{
		"host": {check.Fail, "7 HCAs, expected 8 (missing: mlx5_3)"},
		"*":    {check.OK, ""},
	})
}

// A management port that is down is not ib.port's business (Fabric
// Manager and nvlsm own it), nor are its counters ib.counters'.
func TestSwitchMgmtNotJudged(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.B200)
	for _, dev := range []string{"mlx5_8", "mlx5_11"} {
		sysfsfix.Set(t, root, sysfsfix.PortDir(dev, 1)+"/state", "1: DOWN")
		sysfsfix.Set(t, root, sysfsfix.PortDir(dev, 1)+"/counters/symbol_error", "65535")
	}
	expect(t, namePort, run(t, NewPort(NewGather(root), b200Config())), map[string]want{"*": {check.OK, ""}})
	writeFile(t, root, "proc/sys/kernel/random/boot_id", bootA+"\n")
	st := statefile.Dir{Path: t.TempDir()}
	for _, w := range []string{"baseline recorded", "within limits"} {
		rs := run(t, NewCounters(root, NewGather(root), b200Config(), st))
		expect(t, nameCounters, rs, map[string]want{"*": {check.OK, w}})
		if len(rs) != 8 {
			t.Errorf("%d results, want the 8 HCA ports", len(rs))
		}
	}
}

func vpdBytes(id string, ro, rw [][2]string, end bool) []byte {
	large := func(tag byte, body []byte) []byte {
		return append([]byte{tag, byte(len(body)), byte(len(body) >> 8)}, body...)
	}
	kws := func(ks [][2]string) []byte {
		var b []byte
		for _, k := range ks {
			b = append(b, k[0][0], k[0][1], byte(len(k[1])))
			b = append(b, k[1]...)
		}
		return b
	}
	out := large(0x82, []byte(id))
	out = append(out, large(0x90, kws(ro))...)
	if rw != nil {
		out = append(out, large(0x91, kws(rw))...)
	}
	if end {
		out = append(out, 0x78)
	}
	return out
}

func TestScanVPD(t *testing.T) {
	marker := [2]string{"VA", "MLX:MN=MLNX:MODL=CX7:SMDL=SW_MNG"}
	plain := [][2]string{{"PN", "MCX75310AAS-NEAT"}, {"SN", "MT2413X00010"}, {"RV", "\x00"}}
	tests := []struct {
		name string
		vpd  []byte
		want bool
	}{
		{"HCA", vpdBytes("ConnectX-7", plain, [][2]string{{"V1", "N/A"}}, true), false},
		{"marker in VPD-R", vpdBytes("ConnectX-7", append([][2]string{marker}, plain...), nil, true), true},
		{"marker in VPD-W", vpdBytes("ConnectX-7", plain, [][2]string{marker}, true), true},
		// The marker is a keyword value's text; in the identifier string
		// (or split across keywords) it is not one.
		{"marker in the ID string only", vpdBytes("SMDL=SW_MNG", plain, nil, true), false},
		{"SW_MNG without SMDL", vpdBytes("ConnectX-7", [][2]string{{"VA", "SW_MNG"}}, nil, true), false},
		{"after the end tag, not read", append(vpdBytes("ConnectX-7", plain, nil, true), vpdBytes("x", [][2]string{marker}, nil, true)...), false},
		// Broken layouts: the raw bytes read decide.
		{"no end tag, marker present", vpdBytes("ConnectX-7", [][2]string{marker}, nil, false)[:60], true},
		{"keyword overruns its section", []byte("\x82\x01\x00X\x90\x05\x00VA\x20SMDL=SW_MNG\x78"), true},
		{"garbage", []byte("\xff\xff\xff\xffhello"), false},
		{"empty", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := scanVPD(strings.NewReader(string(tc.vpd)))
			if err != nil || got != tc.want {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// The vpd file is opened non-blocking and not through a link: a FIFO or a
// link planted there is refused, not waited on.
func TestSwitchMgmtFileSafety(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "sys/bus/pci/devices/0000:08:00.0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if ok, err := switchMgmt(root, "0000:08:00.0"); ok || err != nil {
		t.Errorf("no vpd file: %v %v", ok, err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "vpd"), 0o644); err != nil {
		t.Skip(err)
	}
	if ok, err := switchMgmt(root, "0000:08:00.0"); ok || err == nil {
		t.Errorf("FIFO: %v %v", ok, err)
	}
	os.Remove(filepath.Join(dir, "vpd"))
	writeFile(t, root, "target", "\x82\x01\x00X\x90\x0e\x00VA\x0bSMDL=SW_MNG\x78")
	if err := os.Symlink(filepath.Join(root, "target"), filepath.Join(dir, "vpd")); err != nil {
		t.Fatal(err)
	}
	if ok, err := switchMgmt(root, "0000:08:00.0"); ok || err == nil {
		t.Errorf("link: %v %v", ok, err)
	}
}

// An unreadable VPD keeps the device among the HCAs (a sick HCA must not
// vanish from the counts) and is named in the inventory.
func TestVPDUnreadable(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.B200)
	p := filepath.Join(root, "sys/bus/pci/devices", mgmtAddrs[0], "vpd")
	os.Remove(p)
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := Scan(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.HCAs) != 9 || len(d.SwitchMgmt) != 3 || len(d.VPDErrs) != 1 {
		t.Errorf("got %d HCAs, %d management, errors %v", len(d.HCAs), len(d.SwitchMgmt), d.VPDErrs)
	}
	frag, err := Fragment(context.Background(), NewGather(root), nil)
	if err != nil || !strings.Contains(frag, "# WARNING: ") || !strings.Contains(frag, "counted as an HCA") {
		t.Errorf("fragment: %v\n%s", err, frag)
	}
}

// The inventory of an HGX B200 counts the 8 HCAs only and lists the
// management devices as such.
func TestFragmentB200(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.B200)
	frag, err := Fragment(context.Background(), NewGather(root), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("fragment", []byte(frag), "gpu001")
	if err != nil {
		t.Fatalf("fragment does not load: %v\n%s", err, frag)
	}
	p := cfg.Checks.IB.Port
	if p.ExpectedHCAs != 8 || p.ExpectedActivePorts != 8 || p.MinRateGbps != 400 || p.LinkLayer != "InfiniBand" {
		t.Errorf("got %+v\n%s", p, frag)
	}
	if !strings.Contains(frag, "# mlx5_8 0000:08:00.0 fw 28.43.1014 (NVSwitch management, VPD SMDL=SW_MNG: not an HCA, not counted)\n") {
		t.Errorf("management device not listed:\n%s", frag)
	}
	expect(t, namePort, run(t, NewPort(NewGather(root), cfg.Checks.IB)), map[string]want{"*": {check.OK, ""}})
}

// Only ConnectX functions (vendor 0x15b3) are asked: another vendor's
// VPD is not read, even if it held the marker.
func TestSwitchMgmtOnlyMellanox(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.B200)
	sysfsfix.Set(t, root, "sys/bus/pci/devices/"+mgmtAddrs[0]+"/vendor", "0x14e4")
	d, err := Scan(context.Background(), root)
	if err != nil || len(d.SwitchMgmt) != 3 || len(d.HCAs) != 9 {
		t.Errorf("got %d management, %d HCAs, %v", len(d.SwitchMgmt), len(d.HCAs), err)
	}
}
