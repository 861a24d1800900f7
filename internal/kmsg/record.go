package kmsg

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Record is one /dev/kmsg record:
//
//	PRI,SEQ,TS_USEC,FLAGS[,caller=T123][,...];MESSAGE
//	 KEY=VALUE
//
// (Documentation/ABI/testing/dev-kmsg). The kernel escapes control bytes,
// bytes >= 0x7f and '\' in MESSAGE as \xHH; Text holds the unescaped
// message, so a record the kernel stored with embedded newlines holds
// several lines.
type Record struct {
	Facility int    // PRI >> 3: 0 is the kernel; userspace writes get 1 or more
	Level    int    // PRI & 7
	Seq      uint64 // 64-bit sequence number, restarting at 0 each boot
	TimeUsec uint64 // microseconds since boot
	// Flags marks the parts of a line the kernel had to store as
	// several records (see continuation): "-" for a line or its first
	// part, "c" for a later part (current kernels); on 3.x kernels (EL7)
	// "c" for the first part and "+" for later ones.
	Flags  string
	Caller string // "T1234" (task) or "C3" (CPU) with CONFIG_PRINTK_CALLER
	Text   string
}

// String writes the record back in /dev/kmsg's format (no dictionary),
// as the simulator and the tests produce it.
func (r Record) String() string {
	flags := r.Flags
	if flags == "" {
		flags = "-"
	}
	caller := ""
	if r.Caller != "" {
		caller = ",caller=" + r.Caller
	}
	return fmt.Sprintf("%d,%d,%d,%s%s;%s", r.Facility<<3|r.Level, r.Seq, r.TimeUsec, flags, caller, escape(r.Text))
}

var errNotRecord = errors.New("not a kmsg record")

// ParseRecord reads one record: the header line and any " KEY=VALUE"
// dictionary lines after it (ignored).
func ParseRecord(s string) (Record, error) {
	line, _, _ := strings.Cut(s, "\n")
	head, msg, ok := strings.Cut(line, ";")
	if !ok {
		return Record{}, fmt.Errorf("%w: no ';' in %.40q", errNotRecord, line)
	}
	f, n := headFields(head)
	if n < 3 {
		return Record{}, fmt.Errorf("%w: header %.40q has %d fields, want PRI,SEQ,TS", errNotRecord, head, n)
	}
	pri, err1 := strconv.ParseUint(f[0], 10, 16)
	seq, err2 := strconv.ParseUint(f[1], 10, 64)
	ts, err3 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Record{}, fmt.Errorf("%w: header %.40q: %v", errNotRecord, head, errors.Join(err1, err2, err3))
	}
	r := Record{Facility: int(pri >> 3), Level: int(pri & 7), Seq: seq, TimeUsec: ts, Flags: "-", Text: unescape(msg)}
	if n > 3 && f[3] != "" {
		r.Flags = f[3]
	}
	if n > 4 {
		for extra := range strings.SplitSeq(f[4], ",") {
			if c, ok := strings.CutPrefix(extra, "caller="); ok {
				r.Caller = c
			}
		}
	}
	return r, nil
}

// headFields cuts a header into PRI, SEQ, TS, FLAGS and the rest (the
// caller and anything newer), without allocating: every record of every
// run comes through here, a full ring being some 10,000.
func headFields(head string) (f [5]string, n int) {
	for n < 4 {
		field, more, found := strings.Cut(head, ",")
		f[n] = field
		n++
		if !found {
			return f, n
		}
		head = more
	}
	f[4] = head
	return f, 5
}

// SplitRecords cuts a dump of /dev/kmsg (what `cat /dev/kmsg` prints: one
// record per header line, dictionary lines starting with a space) into
// records. A live /dev/kmsg returns exactly one record per read(2); a
// captured file, as the tests and a site's --simulate fixtures use, has
// them back to back.
func SplitRecords(dump string) []string {
	// Each record is a slice of dump (its dictionary lines follow its
	// header): a 1 MiB ring is split without copying it.
	var out []string
	start, end := -1, -1 // the record being read: dump[start:end]
	for pos := 0; pos < len(dump); {
		next := len(dump)
		if i := strings.IndexByte(dump[pos:], '\n'); i >= 0 {
			next = pos + i + 1
		}
		line := dump[pos:next]
		switch {
		case line == "\n":
		case line[0] == ' ' && start >= 0:
			end = next
		default:
			if start >= 0 {
				out = append(out, dump[start:end])
			}
			start, end = pos, next
		}
		pos = next
	}
	if start >= 0 {
		out = append(out, dump[start:end])
	}
	return out
}

func unescape(s string) string {
	if !strings.Contains(s, `\x`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && s[i+1] == 'x' {
			if v, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c >= 0x7f || c == '\\' {
			fmt.Fprintf(&b, `\x%02x`, c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
