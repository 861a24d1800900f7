package kmsg

import (
	"strings"

	"github.com/gpuhc/gpuhc/internal/lazyre"
)

// fragment is a line being rebuilt; last indexes its latest record.
type fragment struct {
	Line
	last int
}

// joinWindow is how many records after an unfinished error line its rest
// may come, other CPUs' messages in between.
const joinWindow = 16

// errorStart is how the lines start whose cut would lose a verdict: the
// NVIDIA driver's XID lines and the NVSwitch driver's SXid lines
//
//	NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
//	nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Non-fatal, Link 46 ...
//
// (the rules' own patterns, in xid and sxid, decide what the line says;
// this only decides whether it is whole).
var errorStart = lazyre.New(`^(?:NVRM: Xid|nvidia-nvswitch[0-9]*: SXid)\b`)

// errorDone is such a line that has its number: "(...): N" and, if
// anything more, a comma after it. The rest of the message may still come
// in a continuation (joined as any other), but the number is what a rule
// cannot do without.
var errorDone = lazyre.New(`^(?:NVRM: Xid|nvidia-nvswitch[0-9]*: SXid) \([^()]*\): [0-9]+(?:,.*)?$`)

// continuation reports whether r carries on an earlier line rather than
// start one. printk without a trailing newline followed by a KERN_CONT
// printk is one record when nothing came in between; when another
// message did, the kernel stores the rest as records of their own, and
// /dev/kmsg marks them: "c" (LOG_CONT, current kernels, where the first
// part is flagged "-") or "+" (3.x kernels such as EL7's 3.10, which flag
// the first part "c"). A record starting a new driver message ("NVRM:",
// "nvidia-nvswitchN:") is never a continuation, whatever its flags.
func continuation(r Record) bool {
	return strings.ContainsAny(r.Flags, "c+") && !strings.HasPrefix(r.Text, "NVRM:") && !strings.HasPrefix(r.Text, "nvidia-nvswitch")
}

// unfinished: an XID or SXid line cut before its number. It can only be
// completed by a continuation, and says nothing as it stands.
func unfinished(text string) bool {
	first, _, _ := strings.Cut(text, "\n")
	first = strings.TrimSpace(first)
	// Most lines are neither: the regexps only for those that may be.
	if !strings.HasPrefix(first, "NVRM: Xid") && !strings.HasPrefix(first, "nvidia-nvswitch") {
		return false
	}
	return errorStart.MatchString(first) && !errorDone.MatchString(first)
}

// Lines rebuilds the kernel's lines from records in sequence order.
//
// Only kernel records count (facility 0): userspace can write /dev/kmsg,
// but only as facility 1 and up, so a forged "NVRM: Xid" line from a
// program never drains a node. A line's Level is its first record's.
//
// A continuation joins the previous line of the same caller: the kernel
// names callers with CONFIG_PRINTK_CALLER ("caller=T4127"), so another
// CPU's message in between does not cut a line. Without it all callers
// are one, and a continuation joins the latest unfinished XID/SXid line
// within joinWindow records, if any, since nothing else can finish it.
//
// hold is set when the last line is an unfinished XID/SXid line: the
// cursor must stay on it so that the next run reads the whole line,
// rather than lose it. No line starts after it, so nothing is judged
// twice: a continuation of an earlier line read again on its own never
// starts with "NVRM:" or "nvidia-nvswitch" and so says nothing.
func Lines(recs []Record) (lines []Line, hold *uint64) {
	frags := make([]fragment, 0, len(recs))
	pending := map[string]int{} // index in frags of the last line per caller
	open := -1                  // index of the latest unfinished error line
	for i, r := range recs {
		if r.Facility != 0 {
			continue
		}
		if continuation(r) {
			k, ok := pending[r.Caller]
			if r.Caller == "" && open >= 0 && i-frags[open].last <= joinWindow {
				k, ok = open, true
			}
			if ok {
				f := &frags[k]
				f.Text += r.Text
				f.last = i
				if k == open && !unfinished(f.Text) {
					open = -1
				}
				continue
			}
		}
		frags = append(frags, fragment{Line: Line{Seq: r.Seq, TimeUsec: r.TimeUsec, Level: r.Level, Text: r.Text}, last: i})
		k := len(frags) - 1
		pending[r.Caller] = k
		if unfinished(r.Text) {
			open = k
		}
	}
	lines = make([]Line, 0, len(frags))
	for k, f := range frags {
		if k == len(frags)-1 && unfinished(f.Text) {
			seq := f.Seq
			hold = &seq
			continue
		}
		lines = splitLines(lines, f.Line)
	}
	return lines, hold
}

// splitLines appends l to lines, cut into lines where the kernel stored
// a record with embedded newlines (a driver printing several lines in one
// call).
func splitLines(lines []Line, l Line) []Line {
	if !strings.Contains(l.Text, "\n") {
		return append(lines, l)
	}
	for t := range strings.SplitSeq(l.Text, "\n") {
		if strings.TrimSpace(t) != "" {
			n := l
			n.Text = t
			lines = append(lines, n)
		}
	}
	return lines
}
