// Package xid is the gpu.xid check: a rule over the run's kernel-log pass
// (kmsg.Reader). It finds the NVIDIA driver's XID lines in the snapshot,
// classifies them by NVIDIA's XID catalogue
// (docs/architecture.md#xid-classification; the config can override it) and
// names the GPU each one hit by index, serial and PCI address:
//
//	gpuhc: gpu.xid: gpu3 (SN 1652…, 0000:4e:00.0): XID 79 GPU has fallen off the bus
package xid

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/escalate"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// Name is the check's name.
const Name = "gpu.xid"

type xidCheck struct {
	node  *gpu.Node
	table Table
	dir   statefile.Dir
	log   kmsg.Reader
}

// New is the gpu.xid check. n names the GPUs (it may be nil, or fail to
// enumerate them: XIDs are then named by PCI address, since a GPU that fell
// off the bus must FAIL whatever NVML says); c's drain and warn lists
// classify XIDs; st keeps the boot's drain-class XIDs (never written when
// st.ReadOnly, as in a dry run); log is the run's kernel-log pass, whose
// cursor is its own (kmsg.Log). The check says Judged once it has saved
// its state.
func New(n *gpu.Node, c config.XID, st statefile.Dir, log kmsg.Reader) check.Check {
	return &xidCheck{node: n, table: NewTable(c), dir: st, log: log}
}

func (c *xidCheck) Name() string { return Name }

// Messages of a run that found nothing to report.
const (
	msgNone    = "no XIDs"
	msgStarted = kmsg.Started
)

// Run judges the snapshot's XID lines and reports one result per GPU: the
// worst of its new XIDs, else the boot's drain-class XID, else OK. A
// snapshot that only found the end of the log (Fresh) has nothing new.
func (c *xidCheck) Run(ctx context.Context) []check.Result {
	ctx, cancel := check.FinishEarly(ctx)
	defer cancel()
	var problems []string
	snap := c.log.Snapshot(ctx)
	if snap.Trouble != "" {
		problems = append(problems, snap.Trouble)
	}
	st, loaded, err := c.load(snap)
	if err != nil {
		problems = append(problems, fmt.Sprintf("cannot read the XID state, this boot's earlier XIDs are forgotten: %v", err))
	}
	lines := snap.Unjudged(st.Through)
	events := Events(lines)
	inv, invErr := c.inventory(ctx)
	if errors.Is(invErr, gpu.ErrNoGPUs) && (snap.Err != nil || len(events) == 0) && !st.failing() {
		// No NVIDIA GPU on the bus and none expected: the kernel log has
		// nothing to say about GPUs, and may not even be readable here.
		// XID lines in it (a saved log replayed on an admin's machine, a
		// GPU gone from the bus) are still judged, by PCI address, and a
		// GPU that failed this boot and has since left the bus (hot
		// removed after its XID 79) stays failed.
		c.log.Judged(Name)
		return []check.Result{{Check: Name, Component: "host", Status: check.Skip, Message: "no NVIDIA GPU on this node"}}
	}
	if snap.Err != nil {
		// Could not check; but a GPU already known to be broken this boot
		// stays broken.
		problems = append(problems, fmt.Sprintf("cannot read the kernel log: %v", snap.Err))
		return withProblems(problems, c.judge(st, inv, invErr, nil, false, msgNone))
	}
	none := msgNone
	if snap.Fresh {
		none = msgStarted
	}
	results := c.judge(st, inv, invErr, events, true, none)
	st.Through = kmsg.Mark(lines, st.Through)
	if err := c.dir.SaveChanged(stateFile, st, loaded); err != nil {
		problems = append(problems, fmt.Sprintf("cannot save the XID state, these XIDs will be counted again: %v", err))
	} else {
		c.log.Judged(Name)
	}
	return withProblems(problems, results)
}

// withProblems puts the host's ERROR, if any, first and in place of its
// "no XIDs": one result per component.
func withProblems(problems []string, results []check.Result) []check.Result {
	if len(problems) == 0 {
		return results
	}
	out := []check.Result{{Component: "host", Status: check.Error, Message: strings.Join(problems, "; ")}}
	for _, r := range results {
		if r.Component != "host" {
			out = append(out, r)
		}
	}
	return out
}

// load reads the saved state for the snapshot's boot. No record, a
// corrupt one or one of another boot (or of a log that restarted without
// a boot id: a reboot) is a new boot's empty state; a record that cannot
// be read at all is an error to report, and the boot starts empty too.
func (c *xidCheck) load(snap kmsg.Snapshot) (st *state, loaded []byte, err error) {
	var raw json.RawMessage
	err = c.dir.Load(stateFile, &raw)
	if err != nil && !errors.Is(err, statefile.ErrCorrupt) {
		return newState(snap.BootID), nil, err
	}
	var saved state
	if err != nil || raw == nil || json.Unmarshal(raw, &saved) != nil {
		return newState(snap.BootID), nil, nil
	}
	// What SaveChanged compares with: the record as it is on disk, even
	// if this boot starts afresh from it.
	loaded = statefile.Encode(&saved)
	if saved.BootID != snap.BootID || (snap.Restarted && snap.BootID == "") {
		return newState(snap.BootID), loaded, nil
	}
	return &saved, loaded, nil
}

func (c *xidCheck) inventory(ctx context.Context) (*gpu.Inventory, error) {
	if c.node == nil {
		return nil, errors.New("no NVML")
	}
	return c.node.Inventory(ctx)
}

// judge builds the results and updates st with this run's events. With
// read false (the log could not be read) it only repeats sticky FAILs.
// none is the message of a GPU with nothing to report.
func (c *xidCheck) judge(st *state, inv *gpu.Inventory, invErr error, events []Event, read bool, none string) []check.Result {
	// Every XID is grouped, reported or not: XID 45 and 48 are judged by
	// the other XIDs of their GPU (Table.Judge).
	byPCI := map[string][]Event{}
	for _, e := range events {
		byPCI[e.PCI] = append(byPCI[e.PCI], e)
	}
	var out []check.Result
	known := map[string]bool{}
	if inv != nil && invErr == nil {
		for _, g := range inv.GPUs {
			known[g.PCIBusID] = true
			r, ok := c.verdict(st, g.PCIBusID, byPCI[g.PCIBusID], &g, read, none)
			if ok {
				out = append(out, r)
			}
		}
	}
	for _, pci := range unknownPCIs(st, byPCI, known) {
		if r, ok := c.verdict(st, pci, byPCI[pci], nil, read, none); ok {
			out = append(out, r)
		}
	}
	if len(out) == 0 && read {
		if errors.Is(invErr, gpu.ErrNoGPUs) {
			return []check.Result{{Component: "host", Status: check.Skip, Message: "no NVIDIA GPU on this node"}}
		}
		return []check.Result{{Component: "host", Status: check.OK, Message: none}}
	}
	return out
}

// unknownPCIs are the PCI addresses with XIDs (new, or sticky) that NVML's
// inventory does not list: typically the GPU that fell off the bus.
func unknownPCIs(st *state, byPCI map[string][]Event, known map[string]bool) []string {
	seen := map[string]bool{}
	for pci := range byPCI {
		seen[pci] = true
	}
	for pci, g := range st.GPUs {
		if g.Fail != nil {
			seen[pci] = true
		}
	}
	var out []string
	for pci := range seen {
		if !known[pci] {
			out = append(out, pci)
		}
	}
	sort.Strings(out)
	return out
}

// verdict is one GPU's result; g is nil for a PCI address NVML does not
// list, which is named by the address (the index would be wrong: indices
// shift when a GPU drops out) and the serial it last had.
func (c *xidCheck) verdict(st *state, pci string, events []Event, g *gpu.GPU, read bool, none string) (check.Result, bool) {
	found := c.table.judgeAll(events)
	gs := st.GPUs[pci]
	if len(found) > 0 {
		gs = st.gpu(pci)
	}
	r := check.Result{Component: pci, IDs: check.IDs{PCIBusID: pci}}
	if gs != nil {
		r.IDs = gs.IDs
		r.IDs.GPUIndex = nil
		r.IDs.PCIBusID = pci
	}
	if g != nil {
		r.Component, r.IDs = g.Component(), g.IDs()
		if gs != nil {
			gs.Component, gs.IDs = r.Component, r.IDs
		}
	}
	switch {
	case len(found) > 0:
		c.record(st.BootID, gs, found, &r)
	case gs != nil && gs.Fail != nil:
		r.Status, r.Action, r.Message = check.Fail, gs.Fail.Action, gs.Fail.Message
	case !read || g == nil:
		return r, false
	case gs != nil && gs.Count > 0:
		r.Status, r.Message = check.OK, fmt.Sprintf("no new XIDs (%d this boot)", gs.Count)
	default:
		r.Status, r.Message = check.OK, none
	}
	return r, true
}

// record counts a GPU's reported XIDs and fills its result: a FAIL
// becomes the boot's sticky failure unless a worse one already is (and
// asks for an RMA when the GPU had it in too many boots before, see
// escalate); WARNs are reported unless the GPU already FAILs this boot.
func (c *xidCheck) record(boot string, gs *gpuState, found []judged, r *check.Result) {
	gs.Count += len(found)
	worst := found[0]
	for _, j := range found[1:] {
		if worse(j, worst) {
			worst = j
		}
	}
	msg := worst.Message
	more := len(found) - 1
	if worst.Status == check.Fail {
		action, note := c.escalate(boot, gs.IDs.Serial, worst)
		msg += note
		if more > 0 {
			msg += fmt.Sprintf(" (+%d more XIDs)", more)
		}
		cand := &sticky{XID: worst.XID, Seq: worst.Seq, Action: action, Message: msg}
		if gs.Fail == nil || severity(cand.Action) >= severity(gs.Fail.Action) {
			gs.Fail = cand
		}
	}
	if gs.Fail != nil {
		r.Status, r.Action, r.Message = check.Fail, gs.Fail.Action, gs.Fail.Message
		return
	}
	var notes []string
	if more > 0 {
		notes = append(notes, fmt.Sprintf("+%d more XIDs", more))
	}
	notes = append(notes, fmt.Sprintf("%d this boot", gs.Count))
	r.Status, r.Action = check.Warn, check.ActionNone
	r.Message = fmt.Sprintf("%s (%s)", msg, strings.Join(notes, ", "))
}

// historyFile keeps, per GPU serial and XID, the boots that XID FAILed
// in (package escalate).
const historyFile = "gpu-xid-history.json"

// escalate records a FAIL in the GPU's cross-boot history, keyed by its
// serial so that a GPU moved to another slot keeps it, and returns the
// action: an RMA once the XID was seen in more than j.EscalateAfter
// boots, with a note saying so (" (3rd boot with it: rma)"). A GPU
// without a known serial, or a history that cannot be read, is not
// escalated: the FAIL stands as the catalogue has it.
func (c *xidCheck) escalate(boot, serial string, j judged) (check.Action, string) {
	if j.EscalateAfter <= 0 || serial == "" {
		return j.Action, ""
	}
	n, err := escalate.New(c.dir, historyFile).Seen(serial, fmt.Sprintf("xid%d", j.XID), boot)
	if err != nil || n <= j.EscalateAfter {
		return j.Action, ""
	}
	return check.ActionRMA, fmt.Sprintf(" (%s boot with it: rma)", check.Ordinal(n))
}
