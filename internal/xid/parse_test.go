package xid

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/kmsg"
)

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		xid  int // 0: not an XID
		pci  string
		text string
	}{
		{"NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
			79, "0000:4e:00.0", "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
		// Drivers before about R450 wrote no "PCI:".
		{"NVRM: Xid (0000:06:00): 13, Graphics Exception: ESR 0x505648=0x1000e", 13, "0000:06:00.0", "Graphics Exception: ESR 0x505648=0x1000e"},
		{"NVRM: Xid (PCI:0000:DB:00): 119, pid=1, name=x, Timeout after 6s of waiting for RPC response from GPU7 GSP!", 119, "0000:db:00.0",
			"pid=1, name=x, Timeout after 6s of waiting for RPC response from GPU7 GSP!"},
		{"NVRM: Xid (PCI:00000000:4e:00): 48, DBE", 48, "0000:4e:00.0", "DBE"},
		{"NVRM: Xid (PCI:0001:4e:00.0): 95, Uncontained: FBHUB. RST: Yes, D-RST: No", 95, "0001:4e:00.0", "Uncontained: FBHUB. RST: Yes, D-RST: No"},
		{"NVRM: Xid (PCI:0000:4e:00): 79", 79, "0000:4e:00.0", ""},
		{"NVRM: Xid (PCI:0000:4e:00): 79,", 79, "0000:4e:00.0", ""},
		{"  NVRM: Xid (PCI:0000:4e:00): 999, x  ", 999, "0000:4e:00.0", "x"},
		{"NVRM: Xid (PCI:0000:4e:00): 007, x", 7, "0000:4e:00.0", "x"},
		// Not XIDs of a GPU.
		{"nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 12028, Non-fatal, Link 46 egress non-posted PRIV error (First)", 0, "", ""},
		{"NVRM: GPU at PCI:0000:5d:00: GPU-4f3e3c35-6d0c-8f0b-2f36-0e5c0b9b5d7a", 0, "", ""},
		{"python3: NVRM: Xid (PCI:0000:4e:00): 79, quoted in another message", 0, "", ""},
		{"NVRM: Xid (PCI:0000:4e:00): 0, zero", 0, "", ""},
		{"NVRM: Xid (PCI:0000:4e:00): 1000, too big", 0, "", ""},
		{"NVRM: Xid (PCI:0000:4e:00): 79abc", 0, "", ""},
		{"NVRM: Xid (PCI:0000:4e:00): -79, negative", 0, "", ""},
		{"NVRM: Xid (PCI:0000:4e): 79, short address", 0, "", ""},
		{"NVRM: Xid (PCI:zzzz:4e:00): 79, not hex", 0, "", ""},
		{"NVRM: Xid (PCI:0000:4e:00.9): 79, bad function", 0, "", ""},
		{"NVRM: Xid (PCI:0000:4e:00): ", 0, "", ""},
		{"", 0, "", ""},
	} {
		e, ok := ParseLine(tc.line)
		if ok != (tc.xid != 0) || e.XID != tc.xid || e.PCI != tc.pci || e.Text != tc.text {
			t.Errorf("ParseLine(%q) = %+v, %v; want XID %d on %q text %q", tc.line, e, ok, tc.xid, tc.pci, tc.text)
		}
	}
}

// want is an expected event: sequence number, XID, PCI address and the
// start of the driver's text.
type wantEvent struct {
	seq  uint64
	xid  int
	pci  string
	text string
}

func checkEvents(t *testing.T, got []Event, want []wantEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d:\n%s", len(got), len(want), dumpEvents(got))
	}
	for i, w := range want {
		g := got[i]
		if g.Seq != w.seq || g.XID != w.xid || g.PCI != w.pci || !strings.HasPrefix(g.Text, w.text) {
			t.Errorf("event %d = %+v, want %+v", i, g, w)
		}
	}
}

func dumpEvents(es []Event) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "  %d XID %d %s %q\n", e.Seq, e.XID, e.PCI, e.Text)
	}
	return b.String()
}

// The fixtures are real-format /dev/kmsg dumps (`cat /dev/kmsg`), with
// the noise around XIDs that nodes log. Each documents what it shows.
func TestFixtures(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []wantEvent
	}{
		// DGX H100, Ubuntu 22.04 (5.15), driver 550: whole-line records;
		// PCI enumeration records with dictionaries; NVSwitch SXids (not
		// GPU XIDs); a line a user process wrote to /dev/kmsg (facility 1,
		// ignored); XID 94 and 45 from a job; XID 79 surrounded by the
		// driver's other fallen-off-the-bus lines; XID 154 (classified by
		// the table, not the parser).
		{"kmsg-h100.txt", []wantEvent{
			{2213, 94, "0000:2a:00.0", "pid=48213, name=python3, Contained: SM (0x1)."},
			{2214, 45, "0000:2a:00.0", "pid=48213, name=python3, Ch 00000008"},
			{2218, 79, "0000:5d:00.0", "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
			{2223, 154, "0000:5d:00.0", "GPU recovery action changed from 0x0 (None) to 0x2"},
		}},
		// DGX A100, a 5.14 kernel with CONFIG_PRINTK_CALLER: the ring
		// has wrapped (first record 1843). XID 48's line is split after
		// the comma and XID 79's before the number, each time because
		// another CPU logged in between, so the rest is a record of its
		// own flagged "c" with the same caller; the driver's multi-line
		// "fallen off the bus" notice is one record with escaped newlines
		// (\x0a) and no XID; then three XIDs from one job.
		{"kmsg-a100-split.txt", []wantEvent{
			{1845, 48, "0000:47:00.0", "pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected"},
			{1848, 79, "0000:4e:00.0", "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
			{1852, 13, "0000:87:00.0", "pid=7781, name=train.py, Graphics SM Warp Exception"},
			{1853, 13, "0000:87:00.0", "pid=7781, name=train.py, Graphics Exception: ESR"},
			{1854, 43, "0000:87:00.0", "pid=7781, name=train.py, Ch 00000008"},
		}},
		// DGX-1 (V100) on CentOS 7 (3.10), driver 418: the old line
		// format without "PCI:", and the old kernels' continuation flags,
		// "c" on the first part and "+" on the rest; XID 48 is split
		// before its number with an InfiniBand message in between.
		{"kmsg-el7-v100-old.txt", []wantEvent{
			{5123, 13, "0000:06:00.0", "Graphics Exception: ESR 0x505648=0x1000e"},
			{5125, 43, "0000:06:00.0", "Ch 00000010, engmask 00000101"},
			{5126, 48, "0000:89:00.0", "An uncorrectable double bit error (DBE)"},
			{5129, 63, "0000:89:00.0", "Dynamic Page Retirement: New page retired"},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := kmsg.KmsgSource("", "../kmsg/testdata/"+tc.file).Records(context.Background(), 0)
			if err != nil || !b.Complete || len(b.Records) != b.Seen || b.Seen < 10 {
				t.Fatalf("read: %+v, %v", b, err)
			}
			events, hold := eventsOf(b.Records)
			if hold != nil {
				t.Errorf("hold %d on a finished log", *hold)
			}
			checkEvents(t, events, tc.want)
		})
	}
}

func recs(t *testing.T, lines ...string) []kmsg.Record {
	t.Helper()
	var out []kmsg.Record
	for _, l := range lines {
		r, err := kmsg.ParseRecord(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestJoin(t *testing.T) {
	for _, tc := range []struct {
		name string
		recs []string
		want []wantEvent
		hold int64 // -1: none
	}{
		{"kernel merged the parts", []string{"4,1,1,-;NVRM: Xid (PCI:0000:4e:00): 79, GPU has fallen off the bus."},
			[]wantEvent{{1, 79, "0000:4e:00.0", "GPU has fallen off the bus."}}, -1},
		{"rest right after, no caller", []string{"4,1,1,-;NVRM: Xid (PCI:0000:4e:00): ", "4,2,1,c;79, GPU has fallen off the bus."},
			[]wantEvent{{1, 79, "0000:4e:00.0", "GPU has fallen off the bus."}}, -1},
		{"rest after another message, no caller", []string{"4,1,1,-;NVRM: Xid (PCI:0000:4e:00): ", "6,2,1,-;ib0: link up", "4,3,1,c;79, GPU has fallen off the bus."},
			[]wantEvent{{1, 79, "0000:4e:00.0", "GPU has fallen off the bus."}}, -1},
		{"rest in three parts", []string{"4,1,1,-;NVRM: Xid (PCI:0000:4e:00): ", "4,2,1,c;7", "4,3,1,c;9, pid=1, ", "4,4,1,c;name=x, GPU has fallen off the bus."},
			[]wantEvent{{1, 79, "0000:4e:00.0", "pid=1, name=x, GPU has fallen off the bus."}}, -1},
		{"new NVRM line is not a continuation", []string{"4,1,1,-;NVRM: Xid (PCI:0000:4e:00): 48, ", "4,2,1,c;NVRM: Xid (PCI:0000:4f:00): 48, DBE"},
			[]wantEvent{{1, 48, "0000:4e:00.0", ""}, {2, 48, "0000:4f:00.0", "DBE"}}, -1},
		{"continuation of a non-XID line", []string{"6,1,1,-;NVRM: loading NVIDIA", "6,2,1,c; UNIX x86_64 Kernel Module  550.54.15", "4,3,1,-;NVRM: Xid (PCI:0000:4e:00): 31, x"},
			[]wantEvent{{3, 31, "0000:4e:00.0", "x"}}, -1},
		{"userspace record never joins nor counts", []string{"4,1,1,-;NVRM: Xid (PCI:0000:4e:00): ", "12,2,1,c;79, forged"},
			nil, 1},
		{"log ends in an unfinished XID line: hold", []string{"6,1,1,-;ib0: link up", "4,2,1,-;NVRM: Xid (PCI:0000:4e:00): "},
			nil, 2},
		{"hold; a continuation read again is harmless", []string{"4,1,1,-,caller=T1;NVRM: Xid (PCI:0000:4e:00): ", "4,2,1,-,caller=T2;NVRM: Xid (PCI:0000:4f:00): ", "4,3,1,c,caller=T1;79, x"},
			[]wantEvent{{1, 79, "0000:4e:00.0", "x"}}, 2},
		{"no hold when later records were acted on", []string{"4,1,1,-,caller=T1;NVRM: Xid (PCI:0000:4e:00): ", "4,2,1,-,caller=T2;NVRM: Xid (PCI:0000:4f:00): 13, y"},
			[]wantEvent{{2, 13, "0000:4f:00.0", "y"}}, -1},
		{"callers keep parts apart", []string{"4,1,1,-,caller=T1;NVRM: Xid (PCI:0000:4e:00): 48, ", "4,2,1,-,caller=T2;NVRM: Xid (PCI:0000:4f:00): 13, ", "4,3,1,c,caller=T1;DBE", "4,4,1,c,caller=T2;SM exception"},
			[]wantEvent{{1, 48, "0000:4e:00.0", "DBE"}, {2, 13, "0000:4f:00.0", "SM exception"}}, -1},
		{"multi-line record", []string{`4,1,1,-;NVRM: GPU 0000:4e:00.0: GPU has fallen off the bus.\x0aNVRM: Xid (PCI:0000:4e:00): 79, GPU has fallen off the bus.`},
			[]wantEvent{{1, 79, "0000:4e:00.0", "GPU has fallen off the bus."}}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events, hold := eventsOf(recs(t, tc.recs...))
			checkEvents(t, events, tc.want)
			switch {
			case tc.hold < 0 && hold != nil:
				t.Errorf("hold %d, want none", *hold)
			case tc.hold >= 0 && (hold == nil || *hold != uint64(tc.hold)):
				t.Errorf("hold %v, want %d", hold, tc.hold)
			}
		})
	}
}
