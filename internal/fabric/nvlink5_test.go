package fabric

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

const cgroupNVLSMUnderFM = cgroupFM // NVIDIA's start script runs nvlsm in the FM unit

// nvlsm starts the NVLink subnet manager as NVIDIA's packaging runs it:
// /opt/nvidia/nvlsm/sbin/nvlsm (siderolabs/extensions#893's log), comm
// "nvlsm".
func (n *node) nvlsm(pid int, cgroup string) {
	n.t.Helper()
	n.proc(pid, "nvlsm", "/opt/nvidia/nvlsm/sbin/nvlsm", fmStart+50, cgroup)
}

// On an NVLink5 baseboard (HGX B200) no NVSwitch is on the PCI bus; the
// NVSwitch management devices (VPD SMDL=SW_MNG) make the check apply, and
// Fabric Manager and the NVLink subnet manager are both required.
func TestNVLink5(t *testing.T) {
	const mgmt = "NVLink5, NVSwitches managed through mlx5_10,mlx5_11,mlx5_8,mlx5_9"
	tests := []struct {
		name  string
		setup func(n *node)
		st    check.Status
		msg   string
	}{
		{"Fabric Manager and nvlsm running", func(n *node) { n.nvlsm(2130, cgroupNVLSMUnderFM) },
			check.OK, mgmt + ", nvlsm running (pid 2130), nv-fabricmanager running (pid 2116), unit nvidia-fabricmanager.service active"},
		{"nvlsm not running", nil, check.Fail, "nvlsm not running (NVLink5 fabric: Fabric Manager needs the NVLink subnet manager)"},
		{"a dead nvlsm is not running", func(n *node) {
			n.procState(2130, "nvlsm", "/opt/nvidia/nvlsm/sbin/nvlsm", fmStart+50, cgroupFM, 'Z')
		}, check.Fail, "nvlsm not running"},
		{"Fabric Manager not running, nvlsm running", func(n *node) {
			n.remove("proc/2116")
			n.nvlsm(2130, cgroupNVLSMUnderFM)
		}, check.Fail, "nv-fabricmanager not running"},
		{"neither running: both named", func(n *node) { n.remove("proc/2116") },
			check.Fail, "nvlsm not running (NVLink5 fabric: Fabric Manager needs the NVLink subnet manager); nv-fabricmanager not running"},
		{"nvlsm outside its configured unit warns", func(n *node) {
			n.cfg.NVLSMUnit = "nvlsm.service"
			n.nvlsm(2130, cgroupNVLSMUnderFM)
		}, check.Warn, "nvlsm running, unit nvlsm.service not active"},
		{"nvlsm in its own unit", func(n *node) {
			n.cfg.NVLSMUnit = "nvlsm.service"
			n.nvlsm(2130, "0::/system.slice/nvlsm.service\n")
		}, check.OK, "nvlsm running (pid 2130), unit nvlsm.service active"},
		{"nvlsm not checked when nvlsm_process is empty", func(n *node) { n.cfg.NVLSMProcess = "" },
			check.OK, mgmt + ", nv-fabricmanager running (pid 2116)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := onRoot(t, sysfsfix.Tree(t, sysfsfix.B200))
			if tc.setup != nil {
				tc.setup(n)
			}
			want(t, "run", n.run(), tc.st, tc.msg)
		})
	}
}

// The same tree without the SW_MNG marker in any VPD is a node without
// NVSwitches: SKIP, and nvlsm is not asked for.
func TestNVLink5NeedsTheMarker(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.B200)
	for _, a := range []string{"0000:08:00.0", "0000:0a:00.0", "0000:88:00.0", "0000:8a:00.0"} {
		sysfsfix.Remove(t, root, "sys/bus/pci/devices/"+a+"/vpd")
	}
	n := onRoot(t, root)
	want(t, "run", n.run(), check.Skip, "no NVSwitch on the PCI bus, no NVSwitch management device (VPD SMDL=SW_MNG)")
}

// A VPD that cannot be read may hide a management device: ERROR, not a
// SKIP that would leave an NVLink5 node's Fabric Manager unwatched.
func TestNVLink5VPDUnreadable(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.B200)
	for _, a := range []string{"0000:08:00.0", "0000:0a:00.0", "0000:88:00.0", "0000:8a:00.0"} {
		sysfsfix.Remove(t, root, "sys/bus/pci/devices/"+a+"/vpd")
	}
	p := filepath.Join(root, "sys/bus/pci/devices/0000:88:00.0/vpd")
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	n := onRoot(t, root)
	want(t, "run", n.run(), check.Error, "no NVSwitch on the PCI bus, but 1 RDMA devices' VPD unreadable")
}
