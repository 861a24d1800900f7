package xid

import (
	"regexp"
	"strconv"
	"strings"

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
var xidLine = regexp.MustCompile(`^NVRM: Xid \((?:PCI:)?(` + pciaddr.LogPattern + `)\): ([0-9]{1,4})(,.*)?$`)

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

// line is one kernel log line rebuilt from one or more records.
type line struct {
	seq, usec uint64
	text      string
}

// fragment is a line being rebuilt; last indexes its latest record.
type fragment struct {
	line
	last int
}

// joinWindow is how many records after an unfinished XID line its rest
// may come, other CPUs' messages in between.
const joinWindow = 16

// continuation reports whether r carries on an earlier line rather than
// start one. printk without a trailing newline followed by a KERN_CONT
// printk is one record when nothing came in between; when another
// message did, the kernel stores the rest as records of their own, and
// /dev/kmsg marks them: "c" (LOG_CONT, current kernels, where the first
// part is flagged "-") or "+" (3.x kernels such as EL7's 3.10, which flag
// the first part "c"). A record starting a new "NVRM:" message is never a
// continuation, whatever its flags.
func continuation(r Record) bool {
	return strings.ContainsAny(r.Flags, "c+") && !strings.HasPrefix(r.Text, "NVRM:")
}

// unfinished: an XID line cut before its number. It can only be completed
// by a continuation, and is never an XID as it stands.
func unfinished(text string) bool {
	first, _, _ := strings.Cut(text, "\n")
	first = strings.TrimSpace(first)
	return strings.HasPrefix(first, "NVRM: Xid") && !xidLine.MatchString(first)
}

// joinRecords rebuilds the kernel's lines from records in sequence order.
//
// Only kernel records count (facility 0): userspace can write /dev/kmsg,
// but only as facility 1 and up, so a forged "NVRM: Xid" line from a
// program never drains a node.
//
// A continuation joins the previous line of the same caller: the kernel
// names callers with CONFIG_PRINTK_CALLER ("caller=T4127"), so another
// CPU's message in between does not cut a line. Without it all callers
// are one, and a continuation joins the latest unfinished XID line within
// joinWindow records, if any, since nothing else can finish it.
//
// hold is set when the last line is an unfinished XID line: the cursor
// must stay on it so that the next run reads the whole line, rather than
// skip an XID. No line starts after it, so nothing is acted on twice: a
// continuation of an earlier line read again on its own never starts with
// "NVRM:" and so is never an XID.
func joinRecords(recs []Record) (lines []line, hold *uint64) {
	var frags []*fragment
	pending := map[string]*fragment{} // last line per caller
	var open *fragment                // the latest unfinished XID line
	for i, r := range recs {
		if r.Facility != 0 {
			continue
		}
		if continuation(r) {
			f := pending[r.Caller]
			if r.Caller == "" && open != nil && i-open.last <= joinWindow {
				f = open
			}
			if f != nil {
				f.text += r.Text
				f.last = i
				if f == open && !unfinished(f.text) {
					open = nil
				}
				continue
			}
		}
		f := &fragment{line: line{seq: r.Seq, usec: r.TimeUsec, text: r.Text}, last: i}
		frags = append(frags, f)
		pending[r.Caller] = f
		if unfinished(f.text) {
			open = f
		}
	}
	for k, f := range frags {
		if k == len(frags)-1 && unfinished(f.text) {
			seq := f.seq
			hold = &seq
			continue
		}
		lines = append(lines, splitLines(f.line)...)
	}
	return lines, hold
}

// splitLines cuts a record the kernel stored with embedded newlines (the
// driver printing several lines in one call) into lines.
func splitLines(l line) []line {
	if !strings.Contains(l.text, "\n") {
		return []line{l}
	}
	var out []line
	for _, t := range strings.Split(l.text, "\n") {
		if strings.TrimSpace(t) != "" {
			out = append(out, line{seq: l.seq, usec: l.usec, text: t})
		}
	}
	return out
}

// Events finds the XIDs in records (sequence order). See joinRecords for
// hold.
func Events(recs []Record) (events []Event, hold *uint64) {
	lines, hold := joinRecords(recs)
	for _, l := range lines {
		if e, ok := ParseLine(l.text); ok {
			e.Seq, e.TimeUsec = l.seq, l.usec
			events = append(events, e)
		}
	}
	return events, hold
}
