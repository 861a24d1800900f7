package xid

import (
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/lazyre"
	"github.com/gpuhc/gpuhc/internal/pciaddr"
)

// Event is one XID the NVIDIA driver logged.
type Event struct {
	Seq      uint64 // the kmsg record the line starts in
	TimeUsec uint64
	XID      int
	PCI      string // as sysfs writes it: "0000:4e:00.0"
	Text     string // the driver's words after the number
}

// xidLine matches the driver's XID line, in the current form
//
//	NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
//
// and the older one without "PCI:" (older drivers, e.g. R418)
//
//	NVRM: Xid (0000:4e:00): 13, Graphics Exception: ESR 0x505648=0x1000e 0x505650=0x0
//
// Only "NVRM: Xid" at the start of a line counts: NVSwitch "SXid" lines
// and text that merely mentions an XID are not XIDs of a GPU.
//
// The domain has 4 to 8 digits (pciaddr.LogPattern): a GPU behind an
// Intel VMD controller sits in a 5-digit domain ("PCI:10000:01:00").
var xidLine = lazyre.New(`^NVRM: Xid \((?:PCI:)?(` + pciaddr.LogPattern + `)\): ([0-9]{1,4})(,.*)?$`)

// ParseLine reads one kernel log line; ok is false for anything but a
// well-formed XID line (XID 1 to 999 on a PCI address).
func ParseLine(line string) (Event, bool) {
	m := xidLine.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return Event{}, false
	}
	x, err := strconv.Atoi(m[2])
	if err != nil || x < 1 || x > 999 {
		return Event{}, false
	}
	return Event{XID: x, PCI: pciaddr.Normalize(m[1]), Text: strings.TrimSpace(strings.TrimPrefix(m[3], ","))}, true
}

// Events finds the XIDs in a snapshot's lines (kmsg.Lines).
func Events(lines []kmsg.Line) []Event {
	var events []Event
	for _, l := range lines {
		// Most of a kernel log is not XIDs: the regexp only where it may be.
		if !strings.Contains(l.Text, "Xid") {
			continue
		}
		if e, ok := ParseLine(l.Text); ok {
			e.Seq, e.TimeUsec = l.Seq, l.TimeUsec
			events = append(events, e)
		}
	}
	return events
}
