package catalog

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/evidence"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// The fault matrix runs the whole GPU side of one health-check run (the
// catalog's checks on a simulated DGX, as --simulate builds it, then the
// policy in dry-run) for one fault at a time, and asserts what an admin
// would see: the result's status, identifiers and action, and the exact
// drain reason.

// matrixCase is one row. The result asserted is the first drain-worthy
// one (the one the reason names) when reason is set, else the result of
// check about component.
type matrixCase struct {
	name   string
	model  string
	inject []string
	// before are earlier runs, oldest first, each with its own faults:
	// real runs that keep their counters and kernel-log cursor for the
	// dry run. nil: the dry run is gpuhc's first on the node.
	before [][]string
	// kernel are lines (as text, any form --kernel-log takes) appended to
	// the simulated machine's kernel log in the dry run, which then judges
	// that whole log as a replay (--kernel-log): every line new, under a
	// boot of its own (so a case with kernel lines has no before). "@id"
	// is the text of the evidence corpus's item id (internal/evidence),
	// so that the row says where its line comes from.
	kernel []string
	cfg    func(*config.Config)

	check     string
	component string
	status    check.Status
	action    check.Action
	message   string
	ids       func(sim.Model) check.IDs
	// reason is the exact would-drain reason; "" means the outcome must be
	// "none". In message and reason, {N} stands for the seconds a hang
	// took, which vary from run to run.
	reason string
	// bug marks a case whose expectations are what the check should do
	// and does not: a known bug, described here. Mismatches in the
	// aspects the bug affects (bugIn: "result", "status", "action",
	// "message", "ids", "outcome") are logged, not failed, and a case that
	// passes in full fails, so that the mark goes with the fix.
	bug   string
	bugIn []string
}

// A case may carry bug: a known defect of a check, described there, with
// bugIn naming what it gets wrong. Such a case logs "KNOWN BUG" instead of
// failing, and fails once the check is fixed, so the mark goes with the fix.
// None is open.

// gpuIDs: NVML index i, and the simulator's own UUID, serial and PCI
// address for its GPU i.
func gpuIDs(i int) func(sim.Model) check.IDs {
	return func(m sim.Model) check.IDs {
		return check.IDs{GPUIndex: &i, UUID: m.UUID(i), Serial: m.Serial(i), PCIBusID: m.PCIBusID(i)}
	}
}

// busIDs: only the PCI address of the simulator's GPU i (a GPU NVML does
// not see).
func busIDs(i int) func(sim.Model) check.IDs {
	return func(m sim.Model) check.IDs { return check.IDs{PCIBusID: m.PCIBusID(i)} }
}

// lostIDs: what is left of a GPU lost before NVML enumerated it: its NVML
// index, and the PCI address of the simulator's GPU i when the bus could
// tell it (i < 0: it could not).
func lostIDs(index, i int) func(sim.Model) check.IDs {
	return func(m sim.Model) check.IDs {
		ids := check.IDs{GPUIndex: &index}
		if i >= 0 {
			ids.PCIBusID = m.PCIBusID(i)
		}
		return ids
	}
}

func noIDs(sim.Model) check.IDs { return check.IDs{} }

// pciIDs: only a PCI address (a device the simulator does not have).
func pciIDs(addr string) func(sim.Model) check.IDs {
	return func(sim.Model) check.IDs { return check.IDs{PCIBusID: addr} }
}

// corpusLines resolves "@id" to the evidence corpus's item text.
func corpusLines(t *testing.T, lines []string) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		id, ok := strings.CutPrefix(l, "@")
		if !ok {
			out = append(out, l)
			continue
		}
		items, err := evidence.Kernel()
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(items, func(it evidence.KernelItem) bool { return it.ID == id })
		if i < 0 {
			t.Fatalf("no corpus item %q", id)
		}
		out = append(out, items[i].Text)
	}
	return out
}

func sameIDs(got, want check.IDs) bool {
	if (got.GPUIndex == nil) != (want.GPUIndex == nil) || (got.GPUIndex != nil && *got.GPUIndex != *want.GPUIndex) {
		return false
	}
	return got.UUID == want.UUID && got.Serial == want.Serial && got.PCIBusID == want.PCIBusID
}

func fmtIDs(ids check.IDs) string {
	idx := "-"
	if ids.GPUIndex != nil {
		idx = fmt.Sprint(*ids.GPUIndex)
	}
	return fmt.Sprintf("{index %s, uuid %q, serial %q, pci %q}", idx, ids.UUID, ids.Serial, ids.PCIBusID)
}

// pattern matches text exactly, {N} matching a hang's seconds ("0.9").
func pattern(text string) *regexp.Regexp {
	q := strings.ReplaceAll(regexp.QuoteMeta(text), regexp.QuoteMeta("{N}"), `[0-9]+(\.[0-9]+)?`)
	return regexp.MustCompile("^" + q + "$")
}

func migDisabled(c *config.Config) { c.Checks.GPU.Config.MIG = "disabled" }

// hangFast makes a run give up on a hung NVML after about a second, so
// that the hang cases do not take the default 30 s start-up budget and
// 10 s check timeout.
func hangFast(c *config.Config) {
	c.Deadline.Duration, c.CheckTimeout.Duration = 2*time.Second, time.Second
}

var faultMatrix = []matrixCase{
	// ---- DGX A100 ----
	{
		name: "a100 missing gpu2", model: "dgxa100", inject: []string{"gpu2:missing"},
		check: "gpu.count", status: check.Fail, action: check.ActionReboot, ids: busIDs(2),
		message: "0000:47:00.0 on the PCI bus but not seen by NVML (fallen off the bus?)",
		reason:  "gpuhc: gpu.count: 0000:47:00.0: 0000:47:00.0 on the PCI bus but not seen by NVML (fallen off the bus?) (+1 more)",
	},
	{
		name: "a100 gpu5 lost before enumeration", model: "dgxa100", inject: []string{"gpu5:lost"},
		check: "gpu.lost", status: check.Fail, action: check.ActionReboot, ids: lostIDs(5, 5),
		message: "GPU is lost",
		reason:  "gpuhc: gpu.lost: gpu5 (0000:90:00.0): GPU is lost",
	},
	{
		// NVML's indexes shift past the missing GPU, so the lost one (the
		// simulator's gpu5) is NVML's gpu4, and the bus cannot say which
		// of the two unseen addresses is the missing one.
		name: "a100 gpu2 missing and gpu5 lost", model: "dgxa100", inject: []string{"gpu2:missing", "gpu5:lost"},
		check: "gpu.count", component: "host", status: check.Fail, action: check.ActionReboot, ids: noIDs,
		message: "NVML sees 7 GPUs, expected 8",
		reason:  "gpuhc: gpu.count: host: NVML sees 7 GPUs, expected 8 (+2 more)",
	},
	{
		name: "a100 xid 48", model: "dgxa100", inject: []string{"gpu0:xid=48"},
		check: "gpu.xid", status: check.Fail, action: check.ActionResetGPU, ids: gpuIDs(0),
		message: "XID 48 double-bit ECC error",
		reason:  "gpuhc: gpu.xid: gpu0 (SN 1564720004000, 0000:07:00.0): XID 48 double-bit ECC error",
	},
	{
		name: "a100 row remap failure", model: "dgxa100", inject: []string{"gpu7:remap-failure"},
		check: "gpu.memory", status: check.Fail, action: check.ActionRMA, ids: gpuIDs(7),
		message: "row remap failed",
		// An rma is drained as one: the reason says so first.
		reason: "gpuhc: rma: gpu7 (SN 1564720004007, 0000:bd:00.0): gpu.memory: row remap failed",
	},
	{
		// The A100 has no SRAM status call: the per-location counter.
		name: "a100 sram uncorrectable", model: "dgxa100", inject: []string{"gpu3:sram-ue=4"},
		check: "gpu.memory", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(3),
		message: "SRAM uncorrectable 4 > 0",
		reason:  "gpuhc: gpu.memory: gpu3 (SN 1564720004003, 0000:4e:00.0): SRAM uncorrectable 4 > 0",
	},
	{
		name: "a100 pcie gen3 under load", model: "dgxa100", inject: []string{"gpu1:pcie-gen=3"},
		check: "gpu.pcie", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(1),
		message: "PCIe Gen3 x16 < max Gen4 x16",
		reason:  "gpuhc: gpu.pcie: gpu1 (SN 1564720004001, 0000:0f:00.0): PCIe Gen3 x16 < max Gen4 x16",
	},
	{
		name: "a100 two nvlinks down", model: "dgxa100", inject: []string{"gpu4:nvlink-down=0", "gpu4:nvlink-down=1"},
		check: "gpu.nvlink", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(4),
		message: "NVLinks 0, 1 inactive (10 of 12 active)",
		reason:  "gpuhc: gpu.nvlink: gpu4 (SN 1564720004004, 0000:87:00.0): NVLinks 0, 1 inactive (10 of 12 active)",
	},
	{
		name: "a100 hbm over max", model: "dgxa100", inject: []string{"gpu6:memtemp=96"},
		check: "gpu.thermal", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(6),
		message: "memory 96°C >= max 95°C",
		reason:  "gpuhc: gpu.thermal: gpu6 (SN 1564720004006, 0000:b7:00.0): memory 96°C >= max 95°C",
	},
	{
		// DGX A100 has NVSwitches but NVML reports no fabric state before
		// Hopper: SKIP, never FAIL.
		name: "a100 fabric not reported", model: "dgxa100",
		check: "gpu.fabric", component: "gpu5", status: check.Skip, action: check.ActionNone, ids: gpuIDs(5),
		message: "no NVLink fabric state (PCIe, pre-Hopper or no NVSwitch)",
	},

	// ---- DGX H100 ----
	{
		name: "h100 reset required", model: "dgxh100", inject: []string{"gpu1:reset-required"},
		check: "gpu.lost", status: check.Fail, action: check.ActionResetGPU, ids: gpuIDs(1),
		message: "GPU requires reset",
		reason:  "gpuhc: gpu.lost: gpu1 (SN 1654922000001, 0000:2a:00.0): GPU requires reset",
	},
	{
		name: "h100 xid 79", model: "dgxh100", inject: []string{"gpu3:xid=79"},
		check: "gpu.xid", status: check.Fail, action: check.ActionReboot, ids: gpuIDs(3),
		message: "XID 79 GPU has fallen off the bus",
		reason:  "gpuhc: gpu.xid: gpu3 (SN 1654922000003, 0000:5d:00.0): XID 79 GPU has fallen off the bus",
	},
	{
		// The previous run read XID 79 and moved the cursor past it; the
		// FAIL stays for the rest of the boot.
		name: "h100 xid 79 sticky", model: "dgxh100", before: [][]string{{}, {"gpu3:xid=79"}}, inject: []string{"gpu3:xid=79"},
		check: "gpu.xid", status: check.Fail, action: check.ActionReboot, ids: gpuIDs(3),
		message: "XID 79 GPU has fallen off the bus",
		reason:  "gpuhc: gpu.xid: gpu3 (SN 1654922000003, 0000:5d:00.0): XID 79 GPU has fallen off the bus",
	},
	{
		// The driver's own verdict, in the kernel log (XID 154) and
		// from NVML (gpu.recovery), each alone.
		name: "h100 xid 154 reboot required", model: "dgxh100", inject: []string{"gpu5:xid=154"},
		check: "gpu.xid", status: check.Fail, action: check.ActionReboot, ids: gpuIDs(5),
		message: "XID 154 GPU recovery action changed: Node Reboot Required",
		reason:  "gpuhc: gpu.xid: gpu5 (SN 1654922000005, 0000:ab:00.0): XID 154 GPU recovery action changed: Node Reboot Required",
	},
	{
		name: "h100 recovery action reboot, line lost", model: "dgxh100", inject: []string{"gpu5:recovery=reboot"},
		check: "gpu.recovery", status: check.Fail, action: check.ActionReboot, ids: gpuIDs(5),
		message: "GPU recovery action: Node Reboot Required",
		reason:  "gpuhc: gpu.recovery: gpu5 (SN 1654922000005, 0000:ab:00.0): GPU recovery action: Node Reboot Required",
	},
	{
		name: "h100 xid 79 and gpu lost", model: "dgxh100", inject: []string{"gpu3:xid=79", "gpu3:lost=late"},
		check: "gpu.lost", status: check.Fail, action: check.ActionReboot, ids: gpuIDs(3),
		message: "GPU is lost",
		reason:  "gpuhc: gpu.lost: gpu3 (SN 1654922000003, 0000:5d:00.0): GPU is lost (+1 more)",
	},
	{
		name: "h100 volatile dbe", model: "dgxh100", inject: []string{"gpu4:dbe=2"},
		check: "gpu.memory", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(4),
		message: "volatile DBE 2 > 0",
		reason:  "gpuhc: gpu.memory: gpu4 (SN 1654922000004, 0000:9a:00.0): volatile DBE 2 > 0",
	},
	{
		name: "h100 pcie x8", model: "dgxh100", inject: []string{"gpu6:pcie-width=8"},
		check: "gpu.pcie", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(6),
		message: "PCIe Gen5 x8 < max Gen5 x16",
		reason:  "gpuhc: gpu.pcie: gpu6 (SN 1654922000006, 0000:ba:00.0): PCIe Gen5 x8 < max Gen5 x16",
	},
	{
		// Right after boot Fabric Manager is still at work: a WARN first,
		name: "h100 fabric in progress", model: "dgxh100", inject: []string{"gpu5:fabric=in-progress"},
		check: "gpu.fabric", component: "gpu5", status: check.Warn, action: check.ActionNone, ids: gpuIDs(5),
		message: "fabric not initialised yet (state in-progress, first sighting)",
	},
	{
		// ... and a FAIL when the next run finds it still not done.
		name: "h100 fabric in progress on two runs", model: "dgxh100",
		before: [][]string{{"gpu5:fabric=not-started"}}, inject: []string{"gpu5:fabric=in-progress"},
		check: "gpu.fabric", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(5),
		message: "fabric not initialised (state in-progress) on two consecutive runs",
		reason:  "gpuhc: gpu.fabric: gpu5 (SN 1654922000005, 0000:ab:00.0): fabric not initialised (state in-progress) on two consecutive runs",
	},
	{
		name: "h100 gpu at 95C", model: "dgxh100", inject: []string{"gpu0:temp=95"},
		check: "gpu.thermal", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(0),
		message: "GPU 95°C >= slowdown 89°C",
		reason:  "gpuhc: gpu.thermal: gpu0 (SN 1654922000000, 0000:18:00.0): GPU 95°C >= slowdown 89°C",
	},
	{
		name: "h100 hw slowdown on two runs", model: "dgxh100", before: [][]string{{"gpu2:hw-slowdown"}}, inject: []string{"gpu2:hw-slowdown"},
		check: "gpu.thermal", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(2),
		message: "HW slowdown on two consecutive runs",
		reason:  "gpuhc: gpu.thermal: gpu2 (SN 1654922000002, 0000:3a:00.0): HW slowdown on two consecutive runs",
	},
	{
		name: "h100 hw slowdown first sighting", model: "dgxh100", inject: []string{"gpu2:hw-slowdown"},
		check: "gpu.thermal", component: "gpu2", status: check.Warn, action: check.ActionNone, ids: gpuIDs(2),
		message: "HW slowdown (first sighting)",
	},
	{
		name: "h100 power capped", model: "dgxh100", inject: []string{"gpu7:power-limit=500"},
		check: "gpu.power", component: "gpu7", status: check.Warn, action: check.ActionNone, ids: gpuIDs(7),
		message: "power capped at 500 W < default 700 W",
	},
	{
		name: "h100 persistence off", model: "dgxh100", inject: []string{"gpu3:persistence=off"},
		check: "gpu.config", component: "gpu3", status: check.Warn, action: check.ActionNone, ids: gpuIDs(3),
		message: "persistence mode off",
	},
	{
		// Enumeration itself hangs: once NVML's start-up budget is spent,
		// every check but gpu.xid (which reads the kernel log, not NVML)
		// reports the hang on the node.
		name: "h100 nvml hangs at enumeration", model: "dgxh100", inject: []string{"gpu0:hang"}, cfg: hangFast,
		check: "gpu.config", status: check.Fail, action: check.ActionReboot, ids: noIDs,
		message: "NVML did not answer in {N}s",
		reason:  "gpuhc: gpu.config: host: NVML did not answer in {N}s (+10 more)",
	},
	{
		name: "h100 three faults", model: "dgxh100", inject: []string{"gpu1:dbe=1", "gpu6:pcie-width=8", "gpu3:xid=79"},
		check: "gpu.memory", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(1),
		message: "volatile DBE 1 > 0",
		reason:  "gpuhc: gpu.memory: gpu1 (SN 1654922000001, 0000:2a:00.0): volatile DBE 1 > 0 (+2 more)",
	},

	// ---- DGX H200 ----
	{
		name: "h200 driver below minimum", model: "dgxh200",
		cfg:   func(c *config.Config) { c.Checks.GPU.Driver.MinVersion = "560" },
		check: "gpu.driver", status: check.Fail, action: check.ActionDrain, ids: noIDs,
		message: "driver 550.54.15 < minimum 560",
		reason:  "gpuhc: gpu.driver: host: driver 550.54.15 < minimum 560",
	},
	{
		name: "h200 nvml init fails", model: "dgxh200", inject: []string{"gpu0:nvml-init"},
		check: "gpu.driver", status: check.Fail, action: check.ActionDrain, ids: noIDs,
		message: "NVML failed (8 GPUs on the PCI bus): nvmlInit: ERROR_DRIVER_NOT_LOADED",
		reason:  "gpuhc: gpu.driver: host: NVML failed (8 GPUs on the PCI bus): nvmlInit: ERROR_DRIVER_NOT_LOADED",
	},
	{
		name: "h200 row remap pending", model: "dgxh200", inject: []string{"gpu2:remap-pending"},
		check: "gpu.memory", status: check.Fail, action: check.ActionResetGPU, ids: gpuIDs(2),
		message: "row remap pending",
		reason:  "gpuhc: gpu.memory: gpu2 (SN 1655024000002, 0000:3a:00.0): row remap pending",
	},
	{
		name: "h200 row remap failed and pending", model: "dgxh200", inject: []string{"gpu5:remap-pending", "gpu5:remap-failure"},
		check: "gpu.memory", status: check.Fail, action: check.ActionRMA, ids: gpuIDs(5),
		message: "row remap failed",
		reason:  "gpuhc: rma: gpu5 (SN 1655024000005, 0000:ab:00.0): gpu.memory: row remap failed (+1 more)",
	},
	{
		name: "h200 correctable ecc", model: "dgxh200", inject: []string{"gpu3:correctable=5000"},
		check: "gpu.memory", component: "gpu3", status: check.Warn, action: check.ActionNone, ids: gpuIDs(3),
		message: "volatile corrected ECC 5000 > 1000",
	},
	{
		name: "h200 xid 13 warns", model: "dgxh200", before: [][]string{{}}, inject: []string{"gpu6:xid=13"},
		check: "gpu.xid", component: "gpu6", status: check.Warn, action: check.ActionNone, ids: gpuIDs(6),
		message: "XID 13 graphics engine exception (1 this boot)",
	},
	{
		name: "h200 mig on, want disabled", model: "dgxh200", inject: []string{"gpu4:mig=on"}, cfg: migDisabled,
		check: "gpu.config", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(4),
		message: "MIG enabled, want disabled",
		reason:  "gpuhc: gpu.config: gpu4 (SN 1655024000004, 0000:9a:00.0): MIG enabled, want disabled",
	},
	{
		name: "h200 fabric unsupported", model: "dgxh200", inject: []string{"gpu1:fabric=unsupported"},
		check: "gpu.fabric", component: "gpu1", status: check.Skip, action: check.ActionNone, ids: gpuIDs(1),
		message: "no NVLink fabric state (PCIe, pre-Hopper or no NVSwitch)",
	},
	{
		// An idle GPU trains its link down: the generation is not judged.
		name: "h200 idle gpu at gen1", model: "dgxh200", inject: []string{"gpu0:idle"},
		check: "gpu.pcie", component: "gpu0", status: check.OK, action: check.ActionNone, ids: gpuIDs(0),
		message: "PCIe Gen1 x16, max Gen5 (generation judged only under load); replay counter 0 (first run)",
	},
	{
		// NVML says an idle GPU's width too may be reduced: once is a WARN,
		name: "h200 idle gpu at x8", model: "dgxh200", inject: []string{"gpu0:idle", "gpu0:pcie-width=8"},
		check: "gpu.pcie", component: "gpu0", status: check.Warn, action: check.ActionNone, ids: gpuIDs(0),
		message: "PCIe x8 < max x16 at idle (first sighting)",
	},
	{
		// ... twice a FAIL.
		name: "h200 idle gpu at x8 on two runs", model: "dgxh200",
		before: [][]string{{"gpu0:idle", "gpu0:pcie-width=8"}}, inject: []string{"gpu0:idle", "gpu0:pcie-width=8"},
		check: "gpu.pcie", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(0),
		message: "PCIe x8 < max x16 on two consecutive runs",
		reason:  "gpuhc: gpu.pcie: gpu0 (SN 1655024000000, 0000:18:00.0): PCIe x8 < max x16 on two consecutive runs",
	},
	{
		name: "h200 nvlink crc growth", model: "dgxh200", before: [][]string{{}}, inject: []string{"gpu2:nvlink-crc=3:500"},
		check: "gpu.nvlink", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(2),
		message: "NVLink 3 CRC delta 500 > 100",
		reason:  "gpuhc: gpu.nvlink: gpu2 (SN 1655024000002, 0000:3a:00.0): NVLink 3 CRC delta 500 > 100",
	},
	{
		// Without a previous run there is nothing to compare with.
		name: "h200 nvlink crc first run", model: "dgxh200", inject: []string{"gpu2:nvlink-crc=3:500"},
		check: "gpu.nvlink", component: "gpu2", status: check.OK, action: check.ActionNone, ids: gpuIDs(2),
		message: "18 of 18 NVLinks active; error counter baseline recorded",
	},

	// ---- DGX B200 ----
	{
		name: "b200 driver not the pinned one", model: "dgxb200",
		cfg:   func(c *config.Config) { c.Checks.GPU.Driver.ExactVersion = "570.133.20" },
		check: "gpu.driver", status: check.Fail, action: check.ActionDrain, ids: noIDs,
		message: "driver 570.124.06 != required 570.133.20",
		reason:  "gpuhc: gpu.driver: host: driver 570.124.06 != required 570.133.20",
	},
	{
		name: "b200 gpu6 lost after enumeration", model: "dgxb200", inject: []string{"gpu6:lost=late"},
		check: "gpu.lost", status: check.Fail, action: check.ActionReboot, ids: gpuIDs(6),
		message: "GPU is lost",
		reason:  "gpuhc: gpu.lost: gpu6 (SN 1795124000006, 0000:d1:00.0): GPU is lost",
	},
	{
		name: "b200 xid 31 then 79", model: "dgxb200", before: [][]string{{}}, inject: []string{"gpu2:xid=31", "gpu2:xid=79"},
		check: "gpu.xid", status: check.Fail, action: check.ActionReboot, ids: gpuIDs(2),
		message: "XID 79 GPU has fallen off the bus (+1 more XIDs)",
		reason:  "gpuhc: gpu.xid: gpu2 (SN 1795124000002, 0000:52:00.0): XID 79 GPU has fallen off the bus (+1 more XIDs)",
	},
	{
		name: "b200 xid 95", model: "dgxb200", inject: []string{"gpu4:xid=95"},
		check: "gpu.xid", status: check.Fail, action: check.ActionResetGPU, ids: gpuIDs(4),
		message: "XID 95 uncontained ECC error",
		reason:  "gpuhc: gpu.xid: gpu4 (SN 1795124000004, 0000:9d:00.0): XID 95 uncontained ECC error",
	},
	{
		name: "b200 sram uncorrectable", model: "dgxb200", inject: []string{"gpu1:sram-ue=1"},
		check: "gpu.memory", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(1),
		message: "SRAM uncorrectable 1 > 0",
		reason:  "gpuhc: gpu.memory: gpu1 (SN 1795124000001, 0000:43:00.0): SRAM uncorrectable 1 > 0",
	},
	{
		name: "b200 dbe on two gpus", model: "dgxb200", inject: []string{"gpu5:dbe=1", "gpu0:dbe=3"},
		check: "gpu.memory", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(0),
		message: "volatile DBE 3 > 0",
		reason:  "gpuhc: gpu.memory: gpu0 (SN 1795124000000, 0000:1b:00.0): volatile DBE 3 > 0 (+1 more)",
	},
	{
		name: "b200 nvlink down", model: "dgxb200", inject: []string{"gpu7:nvlink-down=5"},
		check: "gpu.nvlink", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(7),
		message: "NVLink 5 inactive (17 of 18 active)",
		reason:  "gpuhc: gpu.nvlink: gpu7 (SN 1795124000007, 0000:df:00.0): NVLink 5 inactive (17 of 18 active)",
	},
	{
		// A part the link table does not list, never seen with a link up.
		name: "h100 pcie card without bridge", model: "dgxh100", inject: []string{"gpu2:name=NVIDIA H100 PCIe", "gpu2:nvlink=inactive"},
		check: "gpu.nvlink", component: "gpu2", status: check.Skip, action: check.ActionNone, ids: gpuIDs(2),
		message: "no NVLink connected",
	},
	{
		name: "h100 nvlinks vanish", model: "dgxh100", before: [][]string{{}}, inject: []string{"gpu3:nvlink=unsupported"},
		check: "gpu.nvlink", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(3),
		message: "no NVLink reported (18 expected)",
		reason:  "gpuhc: gpu.nvlink: gpu3 (SN 1654922000003, 0000:5d:00.0): no NVLink reported (18 expected)",
	},
	{
		name: "b200 fabric bandwidth degraded", model: "dgxb200", inject: []string{"gpu3:fabric-degraded-bw"},
		check: "gpu.fabric", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(3),
		message: "fabric health: bandwidth degraded",
		reason:  "gpuhc: gpu.fabric: gpu3 (SN 1795124000003, 0000:61:00.0): fabric health: bandwidth degraded",
	},
	{
		name: "b200 fabric route recovery", model: "dgxb200", inject: []string{"gpu0:fabric-route-recovery"},
		check: "gpu.fabric", component: "gpu0", status: check.Warn, action: check.ActionNone, ids: gpuIDs(0),
		message: "fabric health: route recovery in progress",
	},
	{
		name: "b200 gpu near slowdown", model: "dgxb200", inject: []string{"gpu5:temp=84"},
		check: "gpu.thermal", component: "gpu5", status: check.Warn, action: check.ActionNone, ids: gpuIDs(5),
		message: "GPU 84°C within 5°C of slowdown 87°C",
	},
	{
		name: "b200 pcie replay growth", model: "dgxb200", before: [][]string{{}}, inject: []string{"gpu6:pcie-replay=500"},
		check: "gpu.pcie", component: "gpu6", status: check.Warn, action: check.ActionNone, ids: gpuIDs(6),
		message: "PCIe replay counter +500 since last run > 100",
	},
	{
		name: "b200 compute mode", model: "dgxb200", inject: []string{"gpu0:compute-mode=exclusive_process"},
		cfg:   func(c *config.Config) { c.Checks.GPU.Config.ComputeMode = "default" },
		check: "gpu.config", status: check.Fail, action: check.ActionDrain, ids: gpuIDs(0),
		message: "compute mode exclusive_process, want default",
		reason:  "gpuhc: gpu.config: gpu0 (SN 1795124000000, 0000:1b:00.0): compute mode exclusive_process, want default",
	},
	{
		// gpu2 enumerates, then every call on it blocks: each NVML check
		// reports the hang on gpu2 and visits no further GPU.
		name: "b200 nvml hangs on gpu2", model: "dgxb200", inject: []string{"gpu2:hang=late"}, cfg: hangFast,
		check: "gpu.config", status: check.Fail, action: check.ActionReboot, ids: gpuIDs(2),
		message: "NVML did not answer in {N}s",
		reason:  "gpuhc: gpu.config: gpu2 (SN 1795124000002, 0000:52:00.0): NVML did not answer in {N}s (+8 more)",
	},

	// ---- the kernel log: real lines of the evidence corpus ----
	{
		// The driver's own verdict, on a GPU NVML does not show: named by
		// its PCI address.
		name: "h100 xid 154 node reboot line", model: "dgxh100", kernel: []string{"@xid154-node-reboot-synthetic"},
		check: "gpu.xid", status: check.Fail, action: check.ActionReboot, ids: pciIDs("0000:04:00.0"),
		message: "XID 154 GPU recovery action changed: Node Reboot Required",
		reason:  "gpuhc: gpu.xid: 0000:04:00.0: XID 154 GPU recovery action changed: Node Reboot Required",
	},
	{
		// A healthy B200's NVLink5 line: IGNORE in NVIDIA's decode, so not
		// reported (its GPU, 0018:01:00, is not one of the simulator's):
		// nothing FAILs and the outcome is none.
		name: "b200 xid 145 nonfatal", model: "dgxb200", kernel: []string{"@xid145-rlw-rxpipe-nonfatal-gpud-pr1174"},
		check: "gpu.xid", component: "gpu0", status: check.OK, action: check.ActionNone, ids: gpuIDs(0),
		message: "no XIDs",
	},
	{
		name: "a100 xid 79 on a PCI id the simulator lacks", model: "dgxa100", kernel: []string{"@xid79-gpu-burn-1"},
		check: "gpu.xid", status: check.Fail, action: check.ActionReboot, ids: pciIDs("0000:02:00.0"),
		message: "XID 79 GPU has fallen off the bus",
		reason:  "gpuhc: gpu.xid: 0000:02:00.0: XID 79 GPU has fallen off the bus",
	},
	{
		name: "h100 sxid fatal", model: "dgxh100", kernel: []string{"@sxid20034-fatal-link48-gpud-sxid-readme"},
		check: "fabric.sxid", status: check.Fail, action: check.ActionResetGPU, ids: pciIDs("0000:06:00.0"),
		message: "nvswitch1 link 48: SXid 20034 LTSSM Fault Up (fatal): reset every GPU and NVSwitch of the fabric together (1 this boot)",
		reason:  "gpuhc: fabric.sxid: 0000:06:00.0: nvswitch1 link 48: SXid 20034 LTSSM Fault Up (fatal): reset every GPU and NVSwitch of the fabric together (1 this boot)",
	},
	{
		name: "h200 sxid non-fatal", model: "dgxh200", kernel: []string{"@sxid12028-nonfatal-first-gpud-sxid-test"},
		check: "fabric.sxid", component: "0000:05:00.0", status: check.Warn, action: check.ActionNone, ids: pciIDs("0000:05:00.0"),
		message: "nvswitch3 link 32: SXid 12028 egress non-posted PRIV error (non-fatal) (1 this boot)",
	},
	{
		name: "h100 aer fatal", model: "dgxh100", kernel: []string{"@aer-fatal-above-2080ti-vgpu-unlock-114"},
		check: "host.kernel", status: check.Fail, action: check.ActionReboot, ids: pciIDs("0000:00:01.1"),
		message: "PCIe AER uncorrected fatal error: pcieport 0000:00:01.1: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID) (1 this boot)",
		reason:  "gpuhc: host.kernel: 0000:00:01.1: PCIe AER uncorrected fatal error: pcieport 0000:00:01.1: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID) (1 this boot)",
	},
	{
		name: "a100 edac uncorrected", model: "dgxa100", kernel: []string{"@edac-ue-ovro-lwa-117"},
		check: "host.kernel", status: check.Fail, action: check.ActionDrain, ids: noIDs,
		message: "uncorrected memory error (EDAC): EDAC MC3: 1 UE memory read error on CPU_SrcID#1_MC#1_Chan#2_DIMM#0 (channel:2 slot:0 page:0xb757589 offset:0x140 grain:32 -  OVERFLOW err_code:0101... (1 this boot)",
		reason:  "gpuhc: host.kernel: mc3: uncorrected memory error (EDAC): EDAC MC3: 1 UE memory read error on CPU_SrcID#1_MC#1_Chan#2_DIMM#0 (channel:2 slot:0 page:0xb757589 offset:0x140 grain:32 - OVERFLOW err_code:0101... (1 this boot)",
	},
	{
		name: "h200 soft lockup", model: "dgxh200", kernel: []string{"@softlockup-deepspeed-925"},
		check: "host.kernel", status: check.Fail, action: check.ActionReboot, ids: noIDs,
		message: "soft lockup: watchdog: BUG: soft lockup - CPU#7 stuck for 23s! [pytest:25222] (1 this boot)",
		reason:  "gpuhc: host.kernel: cpu7: soft lockup: watchdog: BUG: soft lockup - CPU#7 stuck for 23s! [pytest:25222] (1 this boot)",
	},
	{
		name: "b200 nvme i/o error", model: "dgxb200", kernel: []string{"@blkerr-nvme-read-crucible-1844"},
		check: "host.kernel", status: check.Fail, action: check.ActionDrain, ids: noIDs,
		message: "block I/O error: I/O error, dev nvme0n1, sector 131209936 op 0x0:(READ) flags 0x80700 phys_seg 25 prio class 0 (1 this boot)",
		reason:  "gpuhc: host.kernel: nvme0n1: block I/O error: I/O error, dev nvme0n1, sector 131209936 op 0x0:(READ) flags 0x80700 phys_seg 25 prio class 0 (1 this boot)",
	},
	{
		name: "h100 ext4 remounted read-only", model: "dgxh100", kernel: []string{"@ext4-remount-ro-rockchip-970"},
		check: "host.kernel", status: check.Fail, action: check.ActionDrain, ids: noIDs,
		message: "filesystem remounted read-only: EXT4-fs (nvme0n1p1): Remounting filesystem read-only (1 this boot)",
		reason:  "gpuhc: host.kernel: nvme0n1p1: filesystem remounted read-only: EXT4-fs (nvme0n1p1): Remounting filesystem read-only (1 this boot)",
	},
	{
		name: "b200 mlx5 health compromised", model: "dgxb200", kernel: []string{"@mlx5-health-compromised-nvsentinel-test"},
		check: "host.kernel", status: check.Fail, action: check.ActionReboot, ids: pciIDs("0000:41:00.0"),
		message: "mlx5 firmware fatal error: mlx5_core 0000:41:00.0: poll_health:852:(pid 0): device's health compromised - reached miss count (1 this boot)",
		reason:  "gpuhc: host.kernel: 0000:41:00.0: mlx5 firmware fatal error: mlx5_core 0000:41:00.0: poll_health:852:(pid 0): device's health compromised - reached miss count (1 this boot)",
	},
	{
		name: "h200 oom kills slurmd", model: "dgxh200", kernel: []string{"@oom-slurmd-synthetic"},
		check: "host.kernel", status: check.Fail, action: check.ActionDrain, ids: noIDs,
		message: "OOM killer killed a node daemon: Out of memory: Killed process 2214 (slurmd) total-vm:398336kB, anon-rss:10240kB, file-rss:5120kB, shmem-rss:0kB, UID:0 pgtables:204kB oom_score_adj:0 (1 this boot)",
		reason:  "gpuhc: host.kernel: slurmd: OOM killer killed a node daemon: Out of memory: Killed process 2214 (slurmd) total-vm:398336kB, anon-rss:10240kB, file-rss:5120kB, shmem-rss:0kB, UID:0 pgtables:204kB oom_score_adj:0 (1 this boot)",
	},
	{
		// The job's own problem: Slurm reports it.
		name: "a100 oom kills a user's python", model: "dgxa100", kernel: []string{"@oom-user-python-qaconv-19"},
		check: "host.kernel", component: "host", status: check.OK, action: check.ActionNone, ids: noIDs,
		message: "no host faults in the kernel log",
	},
	{
		name: "b200 recovery action reboot", model: "dgxb200", inject: []string{"gpu2:recovery=reboot"},
		check: "gpu.recovery", status: check.Fail, action: check.ActionReboot, ids: gpuIDs(2),
		message: "GPU recovery action: Node Reboot Required",
		reason:  "gpuhc: gpu.recovery: gpu2 (SN 1795124000002, 0000:52:00.0): GPU recovery action: Node Reboot Required",
	},
}

// matrixConfig is the default configuration with the host checks off, so
// that only the GPU checks judge the node.
func matrixConfig(t *testing.T, edit func(*config.Config)) config.Config {
	cfg := config.Default()
	cfg.Root = t.TempDir()
	cfg.StateDir = t.TempDir()
	for _, c := range []*config.Common{&cfg.Checks.CPU.Common, &cfg.Checks.Memory.Common, &cfg.Checks.Modules.Common,
		&cfg.Checks.Mounts.Common, &cfg.Checks.Processes.Common, &cfg.Checks.Thermal.Common,
		// The fabric checks read sysfs, which this matrix does not build;
		// fabric_test.go runs them on kernel-layout trees.
		&cfg.Checks.IB.Port.Common, &cfg.Checks.IB.Counters.Common, &cfg.Checks.IB.GDR.Common,
		&cfg.Checks.Fabric.Manager.Common, &cfg.Checks.Topology.Common} {
		c.Enabled = false
	}
	cfg.Policy.DryRun = true
	if edit != nil {
		edit(&cfg)
	}
	return cfg
}

// simRun is one run of the catalog's checks on a simulated model, built as
// gpuhc-healthcheck --simulate builds it (its state under
// state_dir/simulated, read-only in a dry run), NVML started first with
// the same budget as the program gives it.
func simRun(t *testing.T, cfg config.Config, model string, inject []string, readOnly bool) (*sim.Machine, []check.Result) {
	t.Helper()
	return simRunKernel(t, cfg, model, inject, nil, readOnly)
}

// simRunKernel is simRun whose kernel log, when kernel is not nil, is the
// simulated machine's followed by kernel, judged whole as a replay
// (--simulate with --kernel-log of that log).
func simRunKernel(t *testing.T, cfg config.Config, model string, inject, kernel []string, readOnly bool) (*sim.Machine, []check.Result) {
	t.Helper()
	m, err := sim.Build(model, inject)
	if err != nil {
		t.Fatal(err)
	}
	st := statefile.Dir{Path: filepath.Join(cfg.StateDir, "simulated"), ReadOnly: readOnly}
	src := kmsg.SimulatedSource(m.Kmsg, m.BootID, m.KmsgWatchedFrom())
	if kernel != nil {
		src = replaySource(t, strings.Join(append(slices.Clone(m.Kmsg), corpusLines(t, kernel)...), "\n"))
	}
	env := Env{
		GPU:    gpu.NewNode(m.Server, cfg.Root, cfg.Checks.GPU.Count.Expected, model, gpu.WithBus(m.OnBus)),
		Kernel: kmsg.NewLog(src, st),
		State:  st,
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Deadline.Duration)
	defer cancel()
	tasks := Tasks(cfg, env)
	wctx, wcancel := context.WithTimeout(ctx, max(cfg.Deadline.Duration-15*time.Second, cfg.Deadline.Duration/2))
	env.GPU.Warm(wctx)
	wcancel()
	return m, check.Flatten(check.Run(ctx, tasks))
}

func dryRunPolicy(t *testing.T, cfg config.Config, results []check.Result) policy.Outcome {
	t.Helper()
	e := policy.Engine{Node: "sim001", Policy: cfg.Policy, DryRun: true,
		Now: func() time.Time { return time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC) }}
	run, err := e.Apply(context.Background(), results, policy.State{})
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return run.Outcome
}

func fmtResult(r *check.Result) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("%s %s %v %s %q", r.Check, r.Component, r.Status, r.Action, r.Message)
}

func dumpResults(rs []check.Result) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "\n  %-11s %-14s %-5v %-9s %s %s", r.Check, r.Component, r.Status, r.Action, r.Message, fmtIDs(r.IDs))
	}
	return b.String()
}

func TestFaultMatrix(t *testing.T) {
	perModel := map[string]int{}
	for _, tc := range faultMatrix {
		perModel[tc.model]++
	}
	if len(faultMatrix) < 30 {
		t.Errorf("%d cases, want at least 30", len(faultMatrix))
	}
	for _, model := range sim.Models() {
		if perModel[model] < 5 {
			t.Errorf("%s: %d cases, want at least 5 per simulator", model, perModel[model])
		}
	}
	for _, tc := range faultMatrix {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := matrixConfig(t, tc.cfg)
			for _, inject := range tc.before {
				simRun(t, cfg, tc.model, inject, false)
			}
			if tc.kernel != nil && tc.before != nil {
				t.Fatal("a case with kernel lines is its own boot: no before")
			}
			m, results := simRunKernel(t, cfg, tc.model, tc.inject, tc.kernel, true)
			out := dryRunPolicy(t, cfg, results)
			t.Logf("results:%s\noutcome: %s %q", dumpResults(results), out.Kind, out.Detail)

			var known []string
			wrong := func(aspect, format string, args ...any) {
				msg := fmt.Sprintf(format, args...)
				if tc.bug != "" && slices.Contains(tc.bugIn, aspect) {
					known = append(known, msg)
					return
				}
				t.Error(msg)
			}
			defer func() {
				switch {
				case tc.bug == "":
				case len(known) > 0:
					t.Logf("KNOWN BUG: %s:\n  %s", tc.bug, strings.Join(known, "\n  "))
				case !t.Failed():
					t.Errorf("passes as it should: the bug %q is fixed, remove the mark", tc.bug)
				}
			}()

			var got *check.Result
			if tc.reason != "" {
				for i, r := range results {
					if r.Status == check.Fail {
						got = &results[i]
						break
					}
				}
				if got == nil || got.Check != tc.check {
					wrong("result", "first FAIL %s, want one of %s", fmtResult(got), tc.check)
					return
				}
			} else {
				for i, r := range results {
					if r.Check == tc.check && r.Component == tc.component {
						if got != nil {
							t.Fatalf("two results of %s about %s", tc.check, tc.component)
						}
						got = &results[i]
					}
				}
				if got == nil {
					wrong("result", "no result of %s about %s", tc.check, tc.component)
					return
				}
				for _, r := range results {
					if r.Status == check.Fail {
						wrong("outcome", "unexpected FAIL: %s %s %q", r.Check, r.Component, r.Message)
					}
				}
			}
			if tc.component != "" && got.Component != tc.component {
				wrong("result", "component %q, want %q", got.Component, tc.component)
			}
			if got.Status != tc.status {
				wrong("status", "status %v, want %v", got.Status, tc.status)
			}
			if got.Action != tc.action {
				wrong("action", "action %q, want %q", got.Action, tc.action)
			}
			if !pattern(tc.message).MatchString(got.Message) {
				wrong("message", "message\n got %q\nwant %q", got.Message, tc.message)
			}
			if want := tc.ids(m.Model); !sameIDs(got.IDs, want) {
				wrong("ids", "ids\n got %s\nwant %s", fmtIDs(got.IDs), fmtIDs(want))
			}

			wantKind := policy.WouldDrain
			if tc.reason == "" {
				wantKind = policy.Nothing
			}
			if out.Kind != wantKind {
				wrong("outcome", "outcome %s %q, want %s", out.Kind, out.Detail, wantKind)
			}
			if tc.reason != "" && !pattern(tc.reason).MatchString(out.Detail) {
				wrong("outcome", "reason\n got %q\nwant %q", out.Detail, tc.reason)
			}
			if tc.reason == "" && out.Detail != "" {
				wrong("outcome", "outcome detail %q, want none", out.Detail)
			}
		})
	}
}

// TestFaultMatrixHealthy: each simulator, healthy, has no FAIL, WARN or
// ERROR, with every line of its healthy boot log judged by the rules over
// the kernel log, and the policy would do nothing.
func TestFaultMatrixHealthy(t *testing.T) {
	for _, model := range sim.Models() {
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			cfg := matrixConfig(t, nil)
			// Every line of the healthy boot judged (a replay of the
			// whole log), not only those after the simulated watch point.
			_, results := simRunKernel(t, cfg, model, nil, []string{}, true)
			checks := map[string]bool{}
			for _, r := range results {
				checks[r.Check] = true
				if r.Status != check.OK && r.Status != check.Skip {
					t.Errorf("%s %s: %v %q", r.Check, r.Component, r.Status, r.Message)
				}
				if r.Status == check.Skip && r.Check != "gpu.fabric" {
					t.Errorf("%s %s: SKIP %q", r.Check, r.Component, r.Message)
				}
			}
			if len(checks) != 14 {
				t.Errorf("%d checks reported, want the 12 gpu.* checks, host.kernel and fabric.sxid: %v", len(checks), checks)
			}
			if out := dryRunPolicy(t, cfg, results); out.Kind != policy.Nothing || out.Detail != "" {
				t.Errorf("outcome %s %q, want none", out.Kind, out.Detail)
			}
		})
	}
}
