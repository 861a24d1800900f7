// Package policy turns check results into drain and resume decisions,
// following NHC's ownership rules: gpuhc only ever touches a drain whose
// reason it wrote.
package policy

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/lazyre"
)

// Prefix marks a drain reason as gpuhc's own.
const Prefix = "gpuhc:"

// MaxReason is the longest reason we send; longer ones are cut on a rune
// boundary so sinfo -R never shows a broken character.
const MaxReason = 256

// Owned reports whether a Slurm reason was written by gpuhc.
func Owned(reason string) bool { return strings.HasPrefix(reason, Prefix) }

// Reason formats `gpuhc: <check>: <component>: <message>` for the first
// failure, noting how many more there are, as a single printable line.
func Reason(failures []check.Result) string {
	if len(failures) == 0 {
		return ""
	}
	f := failures[0]
	s := fmt.Sprintf("%s %s: %s: %s", Prefix, f.Check, Component(f), f.Message)
	if f.Action == check.ActionRMA {
		s = PhaseReason(PhaseRMA, f, f.Message)
	}
	if n := len(failures) - 1; n > 0 {
		s += fmt.Sprintf(" (+%d more)", n)
	}
	return Sanitize(s)
}

// Component names the result's component with the identifiers an admin
// needs to find the part: "gpu3 (SN 1654922000003, 0000:4e:00.0)". The
// index alone is not enough: indices change when a GPU falls off the bus.
func Component(r check.Result) string {
	var ids []string
	if r.IDs.Serial != "" {
		ids = append(ids, "SN "+r.IDs.Serial)
	}
	if r.IDs.PCIBusID != "" && r.IDs.PCIBusID != r.Component {
		ids = append(ids, r.IDs.PCIBusID)
	}
	if len(ids) == 0 {
		return r.Component
	}
	return r.Component + " (" + strings.Join(ids, ", ") + ")"
}

// Sanitize makes s one printable line of at most MaxReason bytes. Messages
// carry text read from the kernel and devices; a newline or control byte
// in a Slurm reason would corrupt scontrol's and sinfo's output.
func Sanitize(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			if !space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(r)
	}
	out := strings.TrimRight(b.String(), " ")
	if len(out) <= MaxReason {
		return out
	}
	cut := MaxReason
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	// The cut may fall just after a space: the reason ends in a word, as
	// an uncut one does, so that Sanitize leaves its own output as it is.
	return strings.TrimRight(out[:cut], " ")
}

// checkName is the shape of a check's name: "host.mounts", "gpu.xid",
// "healthcheck". It tells a reason Reason wrote from an admin's free text
// after the prefix ("gpuhc: replacing GPU 3: ticket 42").
var checkName = lazyre.New(`^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*$`)

// ParseReason splits a reason in Reason's form back into its check,
// component and message; ok is false for any other reason. For a gpuhc
// reason in free form, message is the text after the prefix.
func ParseReason(reason string) (check, component, message string, ok bool) {
	body, found := strings.CutPrefix(reason, Prefix)
	if !found {
		return "", "", "", false
	}
	body = strings.TrimSpace(body)
	parts := strings.SplitN(body, ": ", 3)
	if len(parts) == 2 && strings.HasSuffix(parts[1], ":") {
		// An empty message: Sanitize cut Reason's "… <component>: " short.
		parts = append(parts[:1], strings.TrimSuffix(parts[1], ":"), "")
	}
	if len(parts) == 3 && checkName.MatchString(parts[0]) {
		// Drop the identifiers Component added: "gpu3 (SN …, 0000:4e:00.0)".
		// Reason never writes an empty component, nor one that is only
		// identifiers ("gpuhc: x:  (y): z" is free text).
		if comp, _, _ := strings.Cut(parts[1], " ("); comp != "" {
			return parts[0], comp, parts[2], true
		}
	}
	return "", "", body, false
}

// Phases of a drain that stand where a reason names its check: what
// remediation (docs/remediation.md) is doing about the failure, or what
// it concluded. ParseReason reads a phase as the check.
const (
	PhaseResetGPU          = "reset-gpu"
	PhaseReboot            = "reboot"
	PhaseRMA               = "rma"
	PhaseRemediationFailed = "remediation-failed"
)

// PhaseReason formats `gpuhc: <phase>: <component>: <check>: <message>`,
// so that sinfo -R says first what is being done, and still names the
// failure: "gpuhc: rma: gpu3 (SN 1652…): gpu.xid: XID 79 …".
func PhaseReason(phase string, f check.Result, message string) string {
	return Sanitize(fmt.Sprintf("%s %s: %s: %s: %s", Prefix, phase, Component(f), f.Check, message))
}

// Sticky reports whether reason is one gpuhc never resumes by itself
// (an rma, a remediation that failed), and which phase it is.
func Sticky(reason string) (string, bool) {
	phase, _, _, ok := ParseReason(reason)
	if ok && (phase == PhaseRMA || phase == PhaseRemediationFailed) {
		return phase, true
	}
	return "", false
}

// Remediating reports whether reason is a remediation in progress.
func Remediating(reason string) bool {
	phase, _, _, ok := ParseReason(reason)
	return ok && (phase == PhaseResetGPU || phase == PhaseReboot)
}

// RebootIssued is what slurmctld appends to a node's reason when it issues
// the reboot gpuhc asked for, and keeps after the boot (measured on 22.05,
// 24.11 and 26.05: "<reason> : reboot issued", set by user slurm).
const RebootIssued = " : reboot issued"

// SameDrain reports whether the reason on the node is still the drain
// gpuhc recorded as ours: the same, or as slurmctld rewrote it for a
// reboot gpuhc asked for.
func SameDrain(ours, onNode string) bool {
	return onNode == ours || (Remediating(ours) && onNode == ours+RebootIssued)
}
