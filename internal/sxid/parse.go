package sxid

import (
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/lazyre"
	"github.com/gpuhc/gpuhc/internal/pciaddr"
)

// Event is one SXid line of the NVSwitch driver.
type Event struct {
	Switch int    // N of nvidia-nvswitchN
	PCI    string // the switch, as sysfs names it: "0000:84:00.0"
	Code   int
	// Fatal is what the line says: "Fatal" (true), "Non-fatal" (false),
	// or nothing (Said false).
	Fatal, Said bool
	Link        int    // -1 when the line names none
	Desc        string // the driver's words after the link
	// FollowUp lines ("Severity 1 Engine instance 45 Sub-engine instance
	// 00", "Data {0x…}") come after the line that reports the error and
	// repeat its code; they are not errors of their own.
	FollowUp bool
}

// sxidLine matches the driver's line, e.g.
//
//	nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)
//	nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up
//	nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 37 Sub-engine instance 00
//	nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALTED
var (
	sxidLine = lazyre.New(`^nvidia-nvswitch(\d+): SXid \(PCI:([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\): (\d{1,5}), (.*)$`)
	severity = lazyre.New(`^(?i:(fatal|non-fatal|nonfatal)), (.*)$`)
	linkDesc = lazyre.New(`^Link (\d+)\s*(.*)$`)
	followUp = lazyre.New(`^(?:Severity \d+ Engine instance \d+ Sub-engine instance \d+|Data \{)`)
)

// ParseLine reads one kernel line; ok is false for anything but an SXid
// line.
func ParseLine(text string) (Event, bool) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "nvidia-nvswitch") {
		return Event{}, false
	}
	m := sxidLine.FindStringSubmatch(text)
	if m == nil {
		return Event{}, false
	}
	sw, err1 := strconv.Atoi(m[1])
	code, err2 := strconv.Atoi(m[3])
	if err1 != nil || err2 != nil || code == 0 {
		return Event{}, false
	}
	e := Event{Switch: sw, PCI: pciaddr.Normalize(m[2]), Code: code, Link: -1}
	rest := strings.TrimSpace(m[4])
	if followUp.MatchString(rest) {
		e.FollowUp = true
		return e, true
	}
	if s := severity.FindStringSubmatch(rest); s != nil {
		e.Said, e.Fatal = true, strings.EqualFold(s[1], "fatal")
		rest = s[2]
	}
	if l := linkDesc.FindStringSubmatch(rest); l != nil {
		if n, err := strconv.Atoi(l[1]); err == nil {
			e.Link, rest = n, l[2]
		}
	}
	e.Desc = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "(First)"))
	return e, true
}
