// Package sxid is the fabric.sxid check: NVSwitch SXid errors in the
// kernel log, judged by NVIDIA's Fabric Manager User Guide (table.go) over
// the run's one kernel-log pass (internal/kmsg).
//
// A fatal SXid FAILs the switch, named by its PCI address, with action
// reset-gpu: the guide's recovery is to reset every GPU and NVSwitch of
// the fabric together (or restart the host), so the FAIL stays for the
// boot. A non-fatal one WARNs and is counted per switch and code:
//
//	gpuhc: fabric.sxid: 0000:c2:00.0: nvswitch0 link 28: SXid 20034 LTSSM Fault Up (fatal): reset every GPU and NVSwitch of the fabric together (1 this boot)
//
// The line names the switch and its link, not the GPU: on HGX boards the
// GPU behind a switch port is in the Fabric Manager's topology, not in
// the kernel's line, so the result says "link 28" and no more.
package sxid

import (
	"context"
	"fmt"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/kernlog"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// Name is the check's name.
const Name = "fabric.sxid"

// StateFile keeps the boot's SXid episodes; removing it clears a sticky
// SXid FAIL (after the fabric was reset without a reboot).
const StateFile = "fabric-sxid.json"

type sxidCheck struct {
	over map[int]config.SXidOverride
	book kernlog.Book
}

// New is the fabric.sxid check over r's snapshot; c overrides codes; st
// keeps the episodes.
func New(c config.SXid, st statefile.Dir, r kmsg.Reader) check.Check {
	over := map[int]config.SXidOverride{}
	for _, o := range c.Override {
		over[o.Code] = o
	}
	return &sxidCheck{over: over, book: kernlog.Book{
		Check: Name, File: StateFile, Dir: st, Reader: r, Healthy: "no NVSwitch SXid errors",
	}}
}

func (c *sxidCheck) Name() string { return Name }

func (c *sxidCheck) Run(ctx context.Context) []check.Result {
	return c.book.Run(ctx, c.judge)
}

// judge makes one finding per line reporting an SXid. Follow-up lines
// (severity, data) repeat an error already reported and are not counted,
// except where a switch's code shows only in them (its first line was
// lost): then they count once.
func (c *sxidCheck) judge(lines []kmsg.Line) []kernlog.Finding {
	type key struct {
		pci  string
		code int
	}
	var events []Event
	reported := map[key]bool{}
	for _, l := range lines {
		if e, ok := ParseLine(l.Text); ok {
			events = append(events, e)
			if !e.FollowUp {
				reported[key{e.PCI, e.Code}] = true
			}
		}
	}
	var out []kernlog.Finding
	for _, e := range events {
		k := key{e.PCI, e.Code}
		if e.FollowUp {
			if reported[k] {
				continue
			}
			reported[k] = true
		}
		out = append(out, c.finding(e))
	}
	return out
}

// Verdict is the default status and action for an event: the worse of
// the table's class and the line's own word, so that a listed code the
// driver calls fatal this time is fatal.
func Verdict(e Event) (check.Status, check.Action) {
	row, listed := Lookup(e.Code)
	fatal := e.Said && e.Fatal
	if listed && (row.Class == Fatal || row.Class == AlwaysFatal) {
		fatal = true
	}
	if fatal {
		return check.Fail, check.ActionResetGPU
	}
	return check.Warn, check.ActionNone
}

func (c *sxidCheck) finding(e Event) kernlog.Finding {
	def, act := Verdict(e)
	st := def
	if o, ok := c.over[e.Code]; ok {
		st, act = kernlog.Override(def, act, o.Status, o.Action)
	}
	return kernlog.Finding{
		Rule: fmt.Sprintf("sxid_%d", e.Code), Component: e.PCI, Status: st, Action: act,
		Sticky: st == check.Fail, Message: describe(e, def == check.Fail, st == check.Fail), IDs: check.IDs{PCIBusID: e.PCI},
	}
}

// describe is the message: where, which code, what it means; fatal is
// the default verdict, fail the configured one.
func describe(e Event, fatal, fail bool) string {
	where := fmt.Sprintf("nvswitch%d", e.Switch)
	if e.Link >= 0 {
		where += fmt.Sprintf(" link %d", e.Link)
	}
	row, listed := Lookup(e.Code)
	name := e.Desc
	if name == "" {
		name = row.Name
	}
	what := fmt.Sprintf("SXid %d", e.Code)
	if !listed {
		what = "unlisted " + what
	}
	if name != "" {
		what += " " + name
	}
	word := "non-fatal"
	if fatal {
		word = "fatal"
	}
	msg := fmt.Sprintf("%s: %s (%s)", where, what, word)
	if fail {
		msg += ": reset every GPU and NVSwitch of the fabric together"
	}
	return msg
}
