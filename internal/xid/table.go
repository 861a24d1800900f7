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
// 3 a.m. is "XID 79 GPU has fallen off the bus". Codes missing here take
// the catalogue's description (catalog.go); codes it does not list are
// "unlisted XID".
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
	if e, ok := Lookup(x); ok && e.Used() {
		return e.Description
	}
	return "unlisted XID"
}

// Class is what gpuhc does about an XID, by its code alone.
type Class int

// The classes, in order of severity.
const (
	Ignore Class = iota // not reported (counted at most)
	Warn                // counted and reported as WARN
	Drain               // FAIL, for the rest of the boot
)

// DefaultEscalateAfter is how many earlier boots may have seen a
// drain-class XID on one GPU before the next one asks for an RMA.
const DefaultEscalateAfter = 2

// Verdict is gpuhc's judgement of one XID line.
type Verdict struct {
	Status  check.Status // OK: not reported
	Action  check.Action // none unless Status is FAIL
	Message string       // "XID 154 GPU recovery action changed: Node Reboot Required"
	// EscalateAfter: seen on the same GPU in more boots than this, a
	// FAIL becomes an RMA; 0 never.
	EscalateAfter int
}

func (v Verdict) class() Class {
	switch v.Status {
	case check.Fail:
		return Drain
	case check.Warn:
		return Warn
	}
	return Ignore
}

// rule is a site's word on one XID, which replaces the catalogue's.
type rule struct {
	status        check.Status
	action        check.Action // "" : the catalogue's action for the code
	escalateAfter int          // 0: the table's default; -1: never
}

// Table judges XIDs: NVIDIA's catalogue (catalog.go), its workflows
// decoded from the line (decode.go), and the site's overrides from the
// config (the old drain and warn lists, then [[checks.gpu.xid.override]]).
type Table struct {
	rules         map[int]rule
	escalateAfter int
}

// NewTable builds the table from the config. The loader rejects an XID
// listed twice; should one slip through, the override table beats the
// lists, and drain beats warn.
func NewTable(c config.XID) Table {
	t := Table{rules: map[int]rule{}, escalateAfter: c.EscalateAfter}
	for _, x := range c.Warn {
		t.rules[x] = rule{status: check.Warn}
	}
	for _, x := range c.Drain {
		t.rules[x] = rule{status: check.Fail}
	}
	for _, o := range c.Override {
		st, err := check.ParseStatus(o.Status)
		if err != nil {
			continue // the loader rejects it
		}
		t.rules[o.XID] = rule{status: st, action: check.Action(o.Action), escalateAfter: o.EscalateAfter}
	}
	return t
}

// Class is x's class by its code alone, as the epilog uses it: a
// workflow XID whose verdict depends on the line (144 to 150, 154) is
// Warn here, since without the line nothing says it must drain.
func (t Table) Class(x int) Class { return t.Judge(Event{XID: x}, nil).class() }

// Action is the suggested action for x by its code alone: none unless it
// is Drain.
func (t Table) Action(x int) check.Action { return t.Judge(Event{XID: x}, nil).Action }

// Judge is e's verdict. others are the GPU's other XIDs of the same
// batch (e among them or not): XID 45 follows another XID, and XID 48
// follows an XID 94 (a contained error). A site's rule for the code
// replaces the catalogue's, workflow and all.
func (t Table) Judge(e Event, others []Event) Verdict {
	return t.judge(e, neighboursOf(others))
}

func (t Table) judge(e Event, others neighbours) Verdict {
	v := catalogVerdict(e, others)
	if r, ok := t.rules[e.XID]; ok {
		v = r.apply(e.XID, v)
	}
	if v.Status != check.Fail {
		v.Action, v.EscalateAfter = check.ActionNone, 0
		return v
	}
	v.EscalateAfter = t.escalateAfter
	if r, ok := t.rules[e.XID]; ok && r.escalateAfter != 0 {
		v.EscalateAfter = max(r.escalateAfter, 0)
	}
	return v
}

// apply puts the site's rule in place of the catalogue's verdict v.
func (r rule) apply(x int, v Verdict) Verdict {
	out := Verdict{Status: r.status, Action: r.action, Message: describe(x)}
	if out.Status == check.Fail && out.Action == "" {
		out.Action = codeAction(x)
	}
	return out
}

// codeAction is what a FAIL of code x asks for when the line is not
// decoded (a site moved it into the drain list): the catalogue's action
// where it is one, a GPU reset for the workflows that end in one.
func codeAction(x int) check.Action {
	e, _ := Lookup(x)
	switch e.Immediate {
	case RestartBM:
		return check.ActionReboot
	case ResetGPU, WorkflowXID48, WorkflowNVLinkErr, WorkflowNVLink5Err:
		return check.ActionResetGPU
	}
	return check.ActionDrain
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

// judged is an XID with its verdict.
type judged struct {
	Event
	Verdict
}

// JudgeEach judges a batch of XIDs of any GPUs, each among the others
// of its own GPU (by PCI address), as gpu.xid does: out[i] is events[i]'s
// verdict. The epilog's XIDs of a job are such a batch.
func (t Table) JudgeEach(events []Event) []Verdict {
	byPCI := map[string][]Event{}
	for _, e := range events {
		byPCI[e.PCI] = append(byPCI[e.PCI], e)
	}
	nb := make(map[string]neighbours, len(byPCI))
	for pci, evs := range byPCI {
		nb[pci] = neighboursOf(evs)
	}
	out := make([]Verdict, len(events))
	for i, e := range events {
		out[i] = t.judge(e, nb[e.PCI])
	}
	return out
}

// judgeAll judges a GPU's XIDs of one batch (others, for Judge, are the
// batch), leaving out those not reported.
func (t Table) judgeAll(events []Event) []judged {
	var out []judged
	nb := neighboursOf(events)
	for _, e := range events {
		if v := t.judge(e, nb); v.Status > check.OK {
			out = append(out, judged{e, v})
		}
	}
	return out
}

// worse reports whether a is worse than b for the same GPU: FAIL before
// WARN, then the more drastic action, then the earlier event.
func worse(a, b judged) bool {
	if a.Status != b.Status {
		return a.Status > b.Status
	}
	if sa, sb := severity(a.Action), severity(b.Action); sa != sb {
		return sa > sb
	}
	return a.Seq < b.Seq
}

// describe is the message head for one XID: "XID 79 GPU has fallen off the bus".
func describe(x int) string { return fmt.Sprintf("XID %d %s", x, Meaning(x)) }
