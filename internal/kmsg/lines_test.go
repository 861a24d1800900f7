package kmsg

import (
	"fmt"
	"strings"
	"testing"
)

func records(t *testing.T, lines ...string) []Record {
	t.Helper()
	var out []Record
	for _, l := range lines {
		r, err := ParseRecord(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func dumpLines(ls []Line) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "%d/%d:%q ", l.Seq, l.Level, l.Text)
	}
	return b.String()
}

// The line rebuilding, for what the rules over the pass depend on: whole
// lines, kernel records only, the level of the line's first record, and
// the cursor held on an XID or SXid line cut before its number.
func TestLines(t *testing.T) {
	const sxid = "nvidia-nvswitch1: SXid (PCI:0000:84:00.0): "
	for _, tc := range []struct {
		name string
		recs []string
		want string // dumpLines
		hold int64  // -1: none
	}{
		{"plain", []string{"6,1,1,-;ib0: link up", "3,2,1,-;nvme nvme0: I/O 12 QID 3 timeout, aborting"},
			`1/6:"ib0: link up" 2/3:"nvme nvme0: I/O 12 QID 3 timeout, aborting" `, -1},
		// A userspace write (facility 1: PRI 12 is user.warning) is never a
		// kernel line, whatever it says.
		{"userspace write", []string{"12,1,1,-;NVRM: Xid (PCI:0000:4e:00): 79, forged", "14,2,1,-;kernel: BUG: soft lockup"}, ``, -1},
		{"sxid split after the address", []string{"4,1,1,-;" + sxid, "6,2,1,-;ib0: link up", "4,3,1,c;12028, Non-fatal, Link 46 egress non-posted PRIV error (First)"},
			`1/4:"` + sxid + `12028, Non-fatal, Link 46 egress non-posted PRIV error (First)" 2/6:"ib0: link up" `, -1},
		{"log ends in an unfinished SXid line: hold", []string{"6,1,1,-;ib0: link up", "4,2,1,-;" + sxid},
			`1/6:"ib0: link up" `, 2},
		{"log ends in an unfinished XID line: hold", []string{"4,7,1,-;NVRM: Xid (PCI:0000:4e:00): "}, ``, 7},
		{"a new SXid line is not a continuation", []string{"4,1,1,-;" + sxid + "20034, Fatal, Link 30 LTSSM Fault Up", "4,2,1,c;" + sxid + "20034, Severity 1 Engine instance 30"},
			`1/4:"` + sxid + `20034, Fatal, Link 30 LTSSM Fault Up" 2/4:"` + sxid + `20034, Severity 1 Engine instance 30" `, -1},
		{"an SXid with its number is whole", []string{"4,1,1,-;" + sxid + "12028"}, `1/4:"` + sxid + `12028" `, -1},
		{"continuation keeps the first record's level", []string{"6,1,1,-;NVRM: loading NVIDIA", "4,2,1,c; UNIX x86_64 Kernel Module  550.54.15"},
			`1/6:"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15" `, -1},
		{"multi-line record", []string{`3,1,1,-;mce: [Hardware Error]: CPU 0: Machine Check: 0 Bank 7\x0amce: [Hardware Error]: TSC 0 ADDR 1ffff`},
			`1/3:"mce: [Hardware Error]: CPU 0: Machine Check: 0 Bank 7" 1/3:"mce: [Hardware Error]: TSC 0 ADDR 1ffff" `, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, hold := Lines(records(t, tc.recs...))
			if got := dumpLines(lines); got != tc.want {
				t.Errorf("lines %s\nwant  %s", got, tc.want)
			}
			switch {
			case tc.hold < 0 && hold != nil:
				t.Errorf("hold %d, want none", *hold)
			case tc.hold >= 0 && (hold == nil || *hold != uint64(tc.hold)):
				t.Errorf("hold %v, want %d", hold, tc.hold)
			}
		})
	}
}

func TestUnjudgedAndMark(t *testing.T) {
	s := Snapshot{Lines: []Line{{Seq: 4}, {Seq: 4}, {Seq: 7}, {Seq: 9}}}
	for _, c := range []struct {
		from     uint64
		n        int
		nextMark uint64
	}{{0, 4, 10}, {4, 4, 10}, {5, 2, 10}, {8, 1, 10}, {10, 0, 10}, {12, 0, 12}} {
		got := s.Unjudged(c.from)
		if len(got) != c.n {
			t.Errorf("Unjudged(%d): %d lines, want %d", c.from, len(got), c.n)
		}
		if m := Mark(got, c.from); m != c.nextMark {
			t.Errorf("Mark after Unjudged(%d) = %d, want %d", c.from, m, c.nextMark)
		}
	}
}
