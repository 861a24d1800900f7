package kernlog

import (
	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/lazyre"
	"github.com/gpuhc/gpuhc/internal/pciaddr"
)

// Rule is one row of the host rules: a kernel message that means the
// node should not take jobs, with its default verdict. Each row is
// documented, with a real line, in docs/host-rules.md; testdata/ holds
// the real lines with their sources.
type Rule struct {
	// Name is how the config (disable, override) and the docs call it.
	Name string
	// What says what the line means, for the result's message.
	What string
	// Has lists literals of which every matching line contains one: a
	// cheap test that spares the regular expression the ring's other
	// lines (a run judges up to a whole 1 MiB ring with every rule).
	Has []string
	// Match is tried on the line's text. A group named c, where there is
	// one, names the component; the first non-empty c wins.
	Match *lazyre.Regexp
	// MaxLevel: a line whose syslog level is known and less severe than
	// this never matches, so an info or debug line that happens to quote
	// the words cannot fire. All these messages are printed at warning
	// (4) or more severe.
	MaxLevel int
	// Comp turns the c group into the component; with no c group the
	// component is Fixed.
	Comp  func(string) string
	Fixed string
	// Ignore: components that never count (loop devices, CD-ROMs).
	Ignore *lazyre.Regexp
	// Unless: a matching line that also matches this does not count.
	Unless *lazyre.Regexp
	Status check.Status
	Action check.Action
	// OffPath, when set, is the status for a PCI device that is neither a
	// GPU, an HCA or an NVSwitch nor a bridge above one; Status applies on
	// such a path.
	OffPath check.Status
	// Sticky FAILs are repeated for the rest of the boot.
	Sticky bool
}

// pciName is a PCI function as the kernel's dev_printk names it.
const pciName = `[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]`

// aerLine matches AER's lines for an uncorrected error of severity sev
// (Fatal, Non-Fatal): the detail line on the device in error, or the
// root port's summary naming the source (the port itself for "id=").
//
// With Downstream Port Containment the port reports the error itself
// (drivers/pci/pcie/dpc.c dpc_process_error, KERN_WARNING), and the AER
// driver then reads nothing from the contained device: "DPC: ERR_FATAL
// detected" on the port, or since 6.x "DPC: containment event,
// status:0x000d, ERR_FATAL received from 0000:02:00.0" naming the source
// (both quoted in the linux-pci threads "PCI/DPC: Log Error Source ID only
// when valid" and "PCI/AER: report fatal errors of RCiEP and EP if link
// recovered"). dpc is "ERR_FATAL" or "ERR_NONFATAL".
func aerLine(sev, dpc string) string {
	uncorrected := `Uncorrect(?:ed|able) \(` + sev + `\)`
	return `^\S+ (?P<c>` + pciName + `): (?:AER: )?PCIe Bus Error: severity=` + uncorrected +
		`|^\S+ ` + pciName + `: AER: (?:Multiple |first )?` + uncorrected + ` error (?:message )?received(?::| from) (?P<c>` + pciName + `)` +
		`|^\S+ (?P<c>` + pciName + `): AER: (?:Multiple |first )?` + uncorrected + ` error received: id=` +
		`|^\S+ ` + pciName + `: DPC: containment event, status:0x[0-9a-f]+, ` + dpc + ` received from (?P<c>` + pciName + `)` +
		`|^\S+ (?P<c>` + pciName + `): DPC: ` + dpc + ` detected`
}

// scratchDisks are block devices that never make a node unfit: loop
// devices (a container's image file, a squashfs whose file went away),
// CD-ROMs, RAM disks, zram, floppies and nbd. A user's own overlay image
// (Apptainer --overlay) lives on a loop device, so its filesystem errors
// are the user's.
var scratchDisks = lazyre.New(`^(?:loop|sr|ram|zram|fd|nbd)\d+(?:p\d+)?$`)

func asIs(s string) string { return s }
func cpu(s string) string  { return "cpu" + s }
func mc(s string) string   { return "mc" + s }

// daemon undoes the kernel's 15-byte cut of a task name (TASK_COMM_LEN),
// so that the component is the daemon's real name.
func daemon(comm string) string {
	if full, ok := map[string]string{
		"nvidia-persiste": "nvidia-persistenced",
		"nv-fabricmanage": "nv-fabricmanager",
	}[comm]; ok {
		return full
	}
	return comm
}

// Rules is the default table. The message formats are the kernel's
// (source file named per row); the verdicts are BRIEF.md's host rules.
var Rules = []Rule{
	{
		// drivers/pci/pcie/aer.c aer_print_error: printed on the device that
		// reported the error, at KERN_ERR; "AER: " since 5.x, and
		// "Uncorrectable" instead of "Uncorrected" since 6.16. Also the
		// root port's summary, aer_print_port_info (KERN_INFO): "AER:
		// [Multiple ]Uncorrected (Fatal) error received: 0000:03:00.0"
		// (6.x: "error message received from"), naming the error's
		// source, or on 3.x-4.x "received: id=0010" (then the port). It
		// says the same error (the same device is one episode) and counts
		// where its level is unknown (a pasted log, which may have lost
		// the detail line); on a node its info level keeps it out, and the
		// detail line carries the verdict.
		Name: "aer_fatal", What: "PCIe AER uncorrected fatal error",
		Has:      []string{"Uncorrect", "ERR_FATAL"},
		Match:    lazyre.New(aerLine(`Fatal`, `ERR_FATAL`)),
		MaxLevel: 4, Comp: pciaddr.Normalize,
		Status: check.Fail, Action: check.ActionReboot, Sticky: true,
	},
	{
		Name: "aer_nonfatal", What: "PCIe AER uncorrected non-fatal error",
		Has:      []string{"Uncorrect", "ERR_NONFATAL"},
		Match:    lazyre.New(aerLine(`Non-Fatal`, `ERR_NONFATAL`)),
		MaxLevel: 4, Comp: pciaddr.Normalize,
		Status: check.Fail, Action: check.ActionDrain, OffPath: check.Warn, Sticky: true,
	},
	{
		// drivers/edac/edac_mc.c edac_ue_error: "EDAC MC0: 1 UE memory read
		// error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (…)", at KERN_EMERG (CE is
		// KERN_WARNING and does not match: no " UE ").
		Name: "edac_ue", What: "uncorrected memory error (EDAC)",
		Has:      []string{" UE "},
		Match:    lazyre.New(`^EDAC MC(?P<c>\d+): (?:\d+ )?UE `),
		MaxLevel: 4, Comp: mc,
		Status: check.Fail, Action: check.ActionDrain, Sticky: true,
	},
	{
		// arch/x86/kernel/cpu/mce/core.c kill_me_maybe / do_machine_check:
		// "mce: Uncorrected hardware memory error in user-access at …";
		// mm/memory-failure.c: "Memory failure: 0x…: recovery action for …"
		// (a page poisoned by an uncorrected error). Corrected machine checks
		// ("Machine check events logged") do not match.
		Name: "mce_ue", What: "uncorrected memory error (machine check)",
		Has:      []string{"mce: Uncorrected", "Memory failure: "},
		Match:    lazyre.New(`^mce: Uncorrected hardware memory error|^Memory failure: 0x[0-9a-f]+: `),
		MaxLevel: 4, Fixed: "memory",
		Status: check.Fail, Action: check.ActionDrain, Sticky: true,
	},
	{
		// kernel/watchdog.c watchdog_timer_fn, KERN_EMERG: "watchdog: BUG:
		// soft lockup - CPU#12 stuck for 22s! [task:pid]" ("NMI watchdog: " on
		// older kernels). Whatever task was running: a CPU stuck in the
		// kernel for 20 s is the kernel's fault, not the task's.
		Name: "soft_lockup", What: "soft lockup",
		Has:      []string{"BUG: soft lockup"},
		Match:    lazyre.New(`BUG: soft lockup - CPU#(?P<c>\d+) stuck for \d+s!`),
		MaxLevel: 4, Comp: cpu,
		Status: check.Fail, Action: check.ActionReboot, Sticky: true,
	},
	{
		// kernel/rcu/tree_stall.h print_other_cpu_stall / print_cpu_stall:
		// "rcu: INFO: rcu_sched detected stalls on CPUs/tasks:", "rcu: INFO:
		// rcu_preempt self-detected stall on CPU"; 3.x: "INFO:
		// rcu_sched_state detected stall on CPU 0".
		Name: "rcu_stall", What: "RCU stall",
		Has:      []string{"INFO: rcu_"},
		Match:    lazyre.New(`INFO: rcu_\w+ (?:detected (?:expedited )?stalls? on CPU|self-detected stall on CPU)`),
		MaxLevel: 4, Fixed: "kernel",
		Status: check.Fail, Action: check.ActionReboot, Sticky: true,
	},
	{
		// kernel/hung_task.c check_hung_task, KERN_ERR: "INFO: task
		// comm:pid blocked for more than 120 seconds." Any task (BRIEF.md's
		// host rules): a user's process stuck in D state is most often
		// stuck in a driver (nvidia-container-cli in nvidia_uvm), which is
		// what an admin wants to see; a WARN never drains.
		Name: "hung_task", What: "task hung",
		Has:      []string{"blocked for more than"},
		Match:    lazyre.New(`^INFO: task \S+:\d+ blocked for more than \d+ seconds`),
		MaxLevel: 4, Fixed: "kernel",
		Status: check.Warn, Action: check.ActionNone,
	},
	{
		// block/blk-core.c blk_print_req_error (pr_err_ratelimited): "I/O
		// error, dev nvme0n1, sector 131209936 op 0x0:(READ) …"; before 5.x
		// "blk_update_request: I/O error, dev sda, sector 106553248" and
		// "print_req_error: critical medium error, dev sdf, sector 960". The
		// names are blk_errors[]; "operation not supported" (a discard the
		// device lacks), "critical space allocation" (a full thin pool) and
		// "recoverable transport" (a multipath failover) are not disk faults.
		// Loop devices (a squashfs whose file went), CD-ROMs and RAM disks
		// never count.
		Name: "io_error", What: "block I/O error",
		// fs/buffer.c buffer_io_error: "Buffer I/O error on dev sdb,
		// logical block 0, …" ("on device" before 4.x) reports the same
		// failed I/O from the buffer layer; both prints are rate-limited
		// on their own, so either may stand alone.
		Has:      []string{" error, dev ", "Buffer I/O error on dev"},
		Match:    lazyre.New(`(?:^|: )(?:I/O|critical medium|critical target|critical nexus|timeout|protection) error, dev (?P<c>[^,\s]+), sector|^Buffer I/O error on dev(?:ice)? (?P<c>[^,\s]+), logical block`),
		MaxLevel: 4, Comp: asIs,
		Ignore: scratchDisks,
		Status: check.Fail, Action: check.ActionDrain, Sticky: true,
	},
	{
		// drivers/nvme/host/pci.c nvme_timeout, dev_warn: "nvme nvme2: I/O 0
		// QID 0 timeout, reset controller", "… I/O tag 24 (1018) opcode 0x1
		// (Write) QID 7 timeout, aborting …".
		Name: "nvme_timeout", What: "NVMe command timeout",
		Has:      []string{" timeout"},
		Match:    lazyre.New(`^nvme (?P<c>nvme\d+): I/O .*QID \d+ timeout`),
		MaxLevel: 4, Comp: asIs,
		Status: check.Warn, Action: check.ActionNone,
	},
	{
		// drivers/nvme/host/pci.c: nvme_timeout "controller is down; will
		// reset: CSTS=…", nvme_reset_work "Device not ready; aborting reset",
		// nvme_remove_dead_ctrl "Removing after probe failure status: -19",
		// "Disabling device after reset failure: -19".
		Name: "nvme_down", What: "NVMe controller down",
		Has:      []string{"nvme nvme"},
		Match:    lazyre.New(`^nvme (?P<c>nvme\d+): (?:controller is down; will reset|Device not ready; aborting reset|Removing after probe failure|Disabling device after reset failure)`),
		MaxLevel: 4, Comp: asIs,
		Status: check.Fail, Action: check.ActionDrain, Sticky: true,
	},
	{
		// fs/ext4/super.c ext4_handle_error (KERN_CRIT): "EXT4-fs (sdk):
		// Remounting filesystem read-only"; fs/btrfs: "BTRFS info (device
		// sda1): forced readonly". FAT's "Filesystem has been set read-only"
		// (a USB stick, an EFI partition) does not count.
		Name: "fs_readonly", What: "filesystem remounted read-only",
		Has:   []string{"Remounting filesystem read-only", "forced readonly"},
		Match: lazyre.New(`^EXT[234]-fs \((?P<c>[^)]+)\): Remounting filesystem read-only|^BTRFS \w+ \(device (?P<c>[^)]+)\): forced readonly`),
		// btrfs_handle_fs_error prints "forced readonly" with btrfs_info
		// (KERN_INFO): up to info, or it could never fire on a node.
		MaxLevel: 6, Comp: asIs,
		Ignore: scratchDisks,
		Status: check.Fail, Action: check.ActionDrain, Sticky: true,
	},
	{
		// fs/jbd2/journal.c jbd2_journal_abort: "Aborting journal on device
		// sdk-8." (the journal's inode after the dash); fs/ext4:
		// "EXT4-fs error (device nvme0n1p1): ext4_journal_check_start:83: comm
		// kworker/u16:3: Detected aborted journal".
		Name: "journal_abort", What: "ext4 journal aborted",
		Has:      []string{"Aborting journal on device", "Detected aborted journal"},
		Match:    lazyre.New(`^Aborting journal on device (?P<c>\S+?)(?:-\d+)?\.$|^EXT4-fs error \(device (?P<c>[^)]+)\):.*Detected aborted journal`),
		MaxLevel: 4, Comp: asIs,
		Ignore: scratchDisks,
		Status: check.Fail, Action: check.ActionDrain, Sticky: true,
	},
	{
		// fs/xfs/xfs_fsops.c xfs_do_force_shutdown (xfs_alert): "XFS (dm-4):
		// I/O Error Detected. Shutting down filesystem", since 5.15 "XFS
		// (sdb6): Filesystem has been shut down due to log error (0x2)."; also
		// "Corruption of in-memory data (0x8) detected at … Shutting down
		// filesystem."
		// Before 5.x the alert is preceded by "XFS (dm-11):
		// xfs_do_force_shutdown(0x8) called from line 3486 of file …"
		// (xfs_notice, level 5), printed only on a shutdown.
		Name: "xfs_shutdown", What: "XFS filesystem shut down",
		Has:      []string{"XFS ("},
		Match:    lazyre.New(`^XFS \((?P<c>[^)]+)\): (?:.*[Ss]hutting down filesystem|Filesystem has been shut down|xfs_do_force_shutdown\(0x[0-9a-f]+\) called from line)`),
		MaxLevel: 5, Comp: asIs,
		Ignore: scratchDisks,
		Status: check.Fail, Action: check.ActionDrain, Sticky: true,
	},
	{
		// drivers/net/ethernet/mellanox/mlx5/core/health.c poll_health
		// (mlx5_core_err): "device's health compromised - reached miss count"
		// (the firmware stopped answering), "Fatal error 1 detected" (a fatal
		// sensor: firmware or hardware); print_health_info, printed once
		// the device is in a fatal state, gives the health syndrome: "synd
		// 0x8: unrecoverable hardware error" (hsynd_str).
		Name: "mlx5_fatal", What: "mlx5 firmware fatal error",
		Has:      []string{"health compromised", "Fatal error ", "synd 0x"},
		Match:    lazyre.New(`^mlx5_core (?P<c>` + pciName + `): (?:\S+:\d+:\(pid \d+\): )?(?:device's health compromised|Fatal error \d+ detected|synd 0x[0-9a-f]+: )`),
		MaxLevel: 4, Comp: pciaddr.Normalize,
		Status: check.Fail, Action: check.ActionReboot, Sticky: true,
	},
	{
		// mm/oom_kill.c __oom_kill_process, KERN_ERR: "Out of memory: Killed
		// process 1234 (slurmd) total-vm:…" (or "Memory cgroup out of
		// memory: …"). Only the node's own daemons count, named as the kernel
		// cuts them (15 bytes); a job's process killed for memory is the
		// job's problem, and Slurm reports it.
		Name: "oom_daemon", What: "OOM killer killed a node daemon",
		Has: []string{"Killed process "},
		// Anchored at the line's start: "Memory cgroup out of memory:
		// Killed process …" is a cgroup's own limit, a job's, never the
		// node's daemons' (review: a job's process named slurmd, killed
		// at its job's limit, drained the node). slurmd and
		// nv-fabricmanager run as root; one whose line (4.19+) names
		// another UID is a user's program of that name.
		Match:    lazyre.New(`^(?:Out of memory: )?Killed process \d+ \((?P<c>slurmd|munged|nvidia-persiste|nv-fabricmanage)\)`),
		Unless:   lazyre.New(`\((?:slurmd|nv-fabricmanage)\).* UID:[1-9]`),
		MaxLevel: 4, Comp: daemon,
		Status: check.Fail, Action: check.ActionDrain, Sticky: true,
	},
}

// Names lists the rules' names in table order.
func Names() []string {
	out := make([]string, len(Rules))
	for i, r := range Rules {
		out[i] = r.Name
	}
	return out
}
