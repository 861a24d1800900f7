package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// xidPart: the simulated node's kernel log (Machine.Kmsg), read by
// gpu.xid through kmsg.SimulatedSource(m.Kmsg, m.BootID, m.KmsgWatchedFrom()).
// Healthy, it holds the boot messages a DGX logs around the NVIDIA driver,
// none an XID; "gpuN:xid=79" appends the driver's XID line for that GPU.
var xidPart = part{
	name:     "xid",
	defaults: xidDefaults,
	faults: map[string]func(m *Machine, d *server.Device, i int, value string) error{
		"xid": faultXID,
	},
}

// Record priorities as /dev/kmsg writes them: facility 0 (kernel) << 3 |
// level. The driver logs XIDs at KERN_WARNING.
const (
	kmsgNotice  = 5
	kmsgInfo    = 6
	kmsgWarning = 4
)

func xidDefaults(m *Machine, _ *server.Device, i int) {
	if i == 0 {
		m.logf(kmsgNotice, "Linux version 5.15.0-1042-nvidia (buildd@lcy02-amd64-089) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #42-Ubuntu SMP Wed Nov 15 20:28:30 UTC 2023 (Ubuntu 5.15.0-1042.42-nvidia 5.15.131)")
		m.logf(kmsgWarning, "nvidia: loading out-of-tree module taints kernel.")
		m.logf(kmsgInfo, "nvidia-nvlink: Nvlink Core is being initialized, major device number 508")
	}
	m.logf(kmsgInfo, "nvidia %s: enabling device (0000 -> 0002)", m.Model.PCIBusID(i))
	if i == len(m.Model.PCIBus)-1 {
		m.logf(kmsgInfo, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  %s  Tue Mar  5 22:23:56 UTC 2024", m.Model.DriverVersion)
		m.logf(kmsgInfo, "nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  %s  Tue Mar  5 22:15:33 UTC 2024", m.Model.DriverVersion)
	}
}

// xidTexts are the words real drivers (R535 to R570) print after the
// number for the XIDs sites see most; others get a generic tail.
var xidTexts = map[int]string{
	13:  "pid=48213, name=python3, Graphics SM Warp Exception on (GPC 4, TPC 2, SM 1): Out Of Range Address",
	31:  "pid=48213, name=python3, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_3 faulted @ 0x7f3a_1c000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
	43:  "pid=48213, name=python3, Ch 00000008",
	45:  "pid=48213, name=python3, Ch 00000008",
	48:  "pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
	62:  "pid='<unknown>', name=<unknown>, 0000ad37(00000000) 00000000 00000000",
	63:  "pid='<unknown>', name=<unknown>, Row Remapper: New row (0x00000000000fd2c1) Marked for remapping, reset gpu to activate.",
	64:  "pid='<unknown>', name=<unknown>, Row Remapper Error: (0x00000000000fd2c1) - All reserved rows for bank are remapped",
	74:  "pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
	79:  "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
	92:  "pid='<unknown>', name=<unknown>, High single-bit ECC error rate",
	94:  "pid=48213, name=python3, Contained: SM (0x1). RST: No, D-RST: No",
	95:  "pid='<unknown>', name=<unknown>, Uncontained: FBHUB. RST: Yes, D-RST: No",
	109: "pid=48213, name=python3, Ch 00000010, errorString CTX SWITCH TIMEOUT, Info 0x1c011",
	119: "pid='<unknown>', name=<unknown>, Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
	120: "pid='<unknown>', name=<unknown>, GSP task timeout @ pc:0x4bd36ec, task: 1",
	140: "pid='<unknown>', name=<unknown>, An unrecovered ECC error has been detected on the GPU",
	// A healthy B200's line (issue 11) and a NETIR link-down line
	// (leptonai/gpud components/accelerator/nvidia/xid tests).
	145: "RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)",
	149: "NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
	154: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
}

// faultXID: "gpuN:xid=79" — the driver logs XID 79 (any of 1 to 999) on
// GPU N's PCI address. Repeat the spec for several; each gets the next
// sequence number, as the kernel gives them.
func faultXID(m *Machine, _ *server.Device, i int, value string) error {
	x, err := strconv.Atoi(value)
	if err != nil || x < 1 || x > 999 {
		return fmt.Errorf("want an XID from 1 to 999, got %q", value)
	}
	text, ok := xidTexts[x]
	if !ok {
		text = "pid='<unknown>', name=<unknown>, Xid " + value
	}
	// The kernel log names the GPU by domain:bus:device, without function.
	pci := strings.TrimSuffix(m.Model.PCIBusID(i), ".0")
	m.logf(kmsgWarning, "NVRM: Xid (PCI:%s): %d, %s", pci, x, text)
	return nil
}

// KmsgWatchedFrom is the sequence number of the first record logged after
// the simulated node booted: its boot messages are all before it, the
// injected XIDs from it on. gpu.xid starts its cursor at the end of the
// kernel log when it has none (the XIDs already there are from before
// gpuhc watched); a simulation stands for a node gpuhc has watched since
// boot, so that a fire drill's XIDs are new to it (see kmsg.SimulatedSource).
func (m *Machine) KmsgWatchedFrom() uint64 {
	for i, r := range m.Kmsg {
		if strings.Contains(r, ";NVRM: Xid (") {
			return uint64(i)
		}
	}
	return uint64(len(m.Kmsg))
}

// logf appends a kernel record with the next sequence number. Time stamps
// are made up but deterministic: the boot's messages in its first
// seconds, later ones (faults) an hour in.
func (m *Machine) logf(level int, format string, a ...any) {
	seq := len(m.Kmsg)
	usec := 1_000_000 + seq*12_345
	if level == kmsgWarning && strings.HasPrefix(format, "NVRM: Xid") {
		usec = 3_600_000_000 + seq*1_000_000
	}
	m.Kmsg = append(m.Kmsg, fmt.Sprintf("%d,%d,%d,-;%s", level, seq, usec, fmt.Sprintf(format, a...)))
}
