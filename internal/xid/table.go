package xid

import (
	"fmt"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// meanings names the XIDs a datacenter GPU logs, after NVIDIA's XID
// catalog (docs.nvidia.com/deploy/xid-errors, "Analyzing Xid Errors with
// the Xid Catalog") and the driver's nverror.h. The words are the
// catalog's description, lightly shortened; the reason an admin reads at
// 3 a.m. is "XID 79 GPU has fallen off the bus". Codes missing here are
// named "unlisted XID" and still classified by the config's lists.
var meanings = map[int]string{
	8:   "GPU stopped processing",
	11:  "invalid or corrupted push buffer stream",
	13:  "graphics engine exception",
	25:  "invalid or illegal push buffer stream",
	31:  "GPU memory page fault",
	32:  "invalid or corrupted push buffer stream",
	37:  "driver firmware error",
	38:  "driver firmware error",
	39:  "copy engine exception",
	40:  "copy engine exception",
	41:  "copy engine exception",
	43:  "GPU stopped processing",
	44:  "graphics engine fault during context switch",
	45:  "preemptive cleanup, due to previous errors",
	46:  "GPU stopped processing",
	48:  "double-bit ECC error",
	54:  "auxiliary power is not connected to the GPU board",
	56:  "display engine error",
	57:  "error programming video memory interface",
	58:  "unstable video memory interface detected",
	60:  "video processor exception",
	61:  "internal micro-controller breakpoint/warning",
	62:  "internal micro-controller halt",
	63:  "ECC page retirement or row remapping recording event",
	64:  "ECC page retirement or row remapping recording failure",
	65:  "video processor exception",
	66:  "illegal access by driver",
	67:  "illegal access by driver",
	68:  "NVDEC0 exception",
	69:  "graphics engine class error",
	74:  "NVLink error",
	78:  "vGPU start error",
	79:  "GPU has fallen off the bus",
	80:  "corrupted data sent to GPU",
	81:  "VGA subsystem error",
	92:  "high single-bit ECC error rate",
	93:  "non-fatal violation of provisioned InfoROM wear limit",
	94:  "contained ECC error",
	95:  "uncontained ECC error",
	109: "context switch timeout error",
	110: "security fault error",
	119: "GSP RPC timeout",
	120: "GSP error",
	121: "C2C link error",
	136: "NVLink training failed",
	137: "NVLink privilege error",
	140: "unrecovered ECC error",
	141: "CUDA fast path error",
	143: "GPU initialization error",
	144: "NVLink SAW error",
	145: "NVLink RLW error",
	146: "NVLink TLW error",
	147: "NVLink TREX error",
	148: "NVLink NVLPW_CTRL error",
	149: "NVLink NETIR error",
	150: "NVLink MSE error",
	151: "key rotation error",
	154: "GPU recovery action changed",
	155: "NVLink SW-defined error",
	156: "resource retirement event",
	157: "resource retirement failure",
	158: "GPU fatal timeout",
	159: "CHI non-data error",
	167: "PCIe fatal timeout",
	169: "internal micro-controller halt (SEC2)",
	171: "uncorrectable DRAM error",
	172: "uncorrectable SRAM error",
}

// Meaning names an XID ("GPU has fallen off the bus").
func Meaning(x int) string {
	if m, ok := meanings[x]; ok {
		return m
	}
	return "unlisted XID"
}

// actions suggests what to do about a drain-class XID, after the
// catalog's "immediate action" bucket: RESTART_BM (79) needs the node
// rebooted, RESET_GPU (and the ECC, GSP and NVLink workflows that end in
// one) a GPU reset. A site that moves another XID into the drain list
// gets the plain "drain".
var actions = map[int]check.Action{
	46:  check.ActionResetGPU,
	48:  check.ActionResetGPU,
	62:  check.ActionResetGPU,
	64:  check.ActionResetGPU,
	74:  check.ActionResetGPU,
	79:  check.ActionReboot,
	95:  check.ActionResetGPU,
	109: check.ActionResetGPU,
	110: check.ActionReboot,
	119: check.ActionResetGPU,
	120: check.ActionResetGPU,
	136: check.ActionResetGPU,
	140: check.ActionResetGPU,
	143: check.ActionResetGPU,
	144: check.ActionResetGPU,
	145: check.ActionResetGPU,
	146: check.ActionResetGPU,
	147: check.ActionResetGPU,
	148: check.ActionResetGPU,
	149: check.ActionResetGPU,
	150: check.ActionResetGPU,
	158: check.ActionResetGPU,
}

// severity orders actions so the worst XID of a GPU is the one named.
func severity(a check.Action) int {
	switch a {
	case check.ActionRMA:
		return 5
	case check.ActionReboot:
		return 4
	case check.ActionResetGPU:
		return 3
	case check.ActionDrain:
		return 2
	case check.ActionDrainAfterJob:
		return 1
	}
	return 0
}

// Class is what gpuhc does about an XID.
type Class int

// The classes, in order of severity.
const (
	Ignore Class = iota // neither list: not reported
	Warn                // counted and reported as WARN
	Drain               // FAIL, for the rest of the boot
)

// Table classifies XIDs: config.XID's drain and warn lists (design.md §5's
// defaults, which a site may override per host).
type Table struct {
	class map[int]Class
}

// NewTable builds the table from the config's lists. The config loader
// rejects an XID in both lists; should one slip through, drain wins.
func NewTable(c config.XID) Table {
	t := Table{class: map[int]Class{}}
	for _, x := range c.Warn {
		t.class[x] = Warn
	}
	for _, x := range c.Drain {
		t.class[x] = Drain
	}
	return t
}

// Class returns x's class.
func (t Table) Class(x int) Class { return t.class[x] }

// Action is the suggested action for x: none for warn and ignored XIDs.
func (t Table) Action(x int) check.Action {
	if t.class[x] != Drain {
		return check.ActionNone
	}
	if a, ok := actions[x]; ok {
		return a
	}
	return check.ActionDrain
}

// worse reports whether a (an XID) is worse than b for the same GPU: drain
// before warn, then the more drastic action, then the earlier event.
func (t Table) worse(a, b Event) bool {
	if ca, cb := t.Class(a.XID), t.Class(b.XID); ca != cb {
		return ca > cb
	}
	if sa, sb := severity(t.Action(a.XID)), severity(t.Action(b.XID)); sa != sb {
		return sa > sb
	}
	return a.Seq < b.Seq
}

// describe is the message head for one XID: "XID 79 GPU has fallen off the bus".
func describe(x int) string { return fmt.Sprintf("XID %d %s", x, Meaning(x)) }
