package kmsg

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gpuhc/gpuhc/internal/statefile"
)

const xid79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."

// One table per format a saved kernel log comes in: the kernel's text,
// its level where the format carries one (else -1), its time since boot
// where it does (else 0), and the lines that are not the kernel's.
func TestParseText(t *testing.T) {
	for _, tc := range []struct {
		format, in string
		ok         bool
		level      int
		usec       uint64
		text       string
	}{
		{"kmsg", "4,2218,7215402840,-;" + xid79, true, 4, 7215402840, xid79},
		{"kmsg, userspace", "12,7,1,-;" + xid79, true, 4, 1, xid79}, // facility 1: Lines drops it
		{"kmsg, escaped", `3,5,9,-;a\x0ab`, true, 3, 9, "a\nb"},
		{"dmesg", "[  219.470123] " + xid79, true, -1, 219470123, xid79},
		{"dmesg, short fraction", "[ 5.5] x", true, -1, 5500000, "x"},
		{"dmesg, no space", "[219.470123]" + xid79, true, -1, 219470123, xid79},
		{"dmesg -r", "<4>[  219.470123] " + xid79, true, 4, 219470123, xid79},
		{"dmesg -x", "kern  :warn  : [  219.470123] " + xid79, true, 4, 219470123, xid79},
		{"dmesg -x, userspace", "user  :warn  : [  219.470123] " + xid79, false, 0, 0, ""},
		{"dmesg -T", "[Tue Mar  5 22:23:56 2024] " + xid79, true, -1, 0, xid79},
		{"dmesg -T, two-digit day", "[Tue Mar 12 22:23:56 2024] " + xid79, true, -1, 0, xid79},
		{"syslog", "Mar  5 22:23:56 gpu001 kernel: [  219.470123] " + xid79, true, -1, 219470123, xid79},
		{"syslog, no timestamp", "Mar  5 22:23:56 gpu001 kernel: " + xid79, true, -1, 0, xid79},
		{"journalctl -k", "Mar 05 22:23:56 gpu001.example.com kernel: " + xid79, true, -1, 0, xid79},
		{"journalctl -o short-precise", "Mar 05 22:23:56.123456 gpu001 kernel: " + xid79, true, -1, 0, xid79},
		{"journalctl -o short-iso", "2024-03-05T22:23:56+0000 gpu001 kernel: " + xid79, true, -1, 0, xid79},
		{"rsyslog RFC 3339", "2024-03-05T22:23:56.123456+00:00 gpu001 kernel: [  219.470123] " + xid79, true, -1, 219470123, xid79},
		{"RFC 3339, Z", "2024-03-05T22:23:56Z gpu001 kernel: " + xid79, true, -1, 0, xid79},
		// Forms pasted in public reports (testdata/evidence/kernel).
		{"journal, no host", "Mar 27 17:40:36 kernel: " + xid79, true, -1, 0, xid79},
		{"journal, no host, two spaces", "Feb 23 03:28:16  kernel: " + xid79, true, -1, 0, xid79},
		{"journal, kernel: only", "kernel: [   17.982217] " + xid79, true, -1, 17982217, xid79},
		{"syslog, unpadded day", "Dec 1 15:01:07 cluster1 kernel: " + xid79, true, -1, 0, xid79},
		{"dmesg -H", "[  +0.000001] " + xid79, true, -1, 0, xid79},
		{"dmesg -x --time-format iso", "kern  :warn  : 2025-01-21T04:41:44,283302+00:00 " + xid79, true, 4, 0, xid79},
		{"dmesg -x iso, a device line", "kern  :err   : 2025-01-21T04:41:44,283302+00:00 mlx5_core 0000:41:00.0: x", true, 3, 0, "mlx5_core 0000:41:00.0: x"},
		{"journal, no host, another program", "Mar 27 17:40:36 sshd[812]: " + xid79, false, 0, 0, ""},
		// Another program's syslog line is not the kernel's, whatever it
		// says.
		{"syslog, another program", "Mar  5 22:23:56 gpu001 python3[4121]: " + xid79, false, 0, 0, ""},
		{"syslog, slurmd", "2024-03-05T22:23:56.123456+00:00 gpu001 slurmd[2211]: error: " + xid79, false, 0, 0, ""},
		{"syslog, nv-fabricmanager", "Mar  5 22:23:56 gpu001 nv-fabricmanager: detected NVSwitch fatal error", false, 0, 0, ""},
		// Found in review: the caller printed after the timestamp,
		// journalctl's short-monotonic, dmesg's ISO time.
		{"dmesg, caller", "[   18.819394][  T298] " + xid79, true, -1, 18819394, xid79},
		{"dmesg, caller after a space", "[   18.819394] [  C12] " + xid79, true, -1, 18819394, xid79},
		{"syslog, caller", "Sep  1 14:26:53 ftp kernel: [   18.819394][  T298] " + xid79, true, -1, 18819394, xid79},
		{"journalctl -o short-monotonic", "[  219.470123] gpu001 kernel: " + xid79, true, -1, 219470123, xid79},
		{"dmesg --time-format=iso", "2024-03-05T22:23:56,123456+00:00 " + xid79, true, -1, 0, xid79},
		{"dmesg --time-format=iso, AER", "2024-03-05T22:23:56,123456+00:00 nvidia 0000:3b:00.0: AER: x", true, -1, 0, "nvidia 0000:3b:00.0: AER: x"},
		{"a kernel line that looks like a host", "[  5.0] nvme nvme0: I/O 12 QID 3 timeout", true, -1, 5000000, "nvme nvme0: I/O 12 QID 3 timeout"},
		{"bare", xid79, true, -1, 0, xid79},
		{"bare SXid", "nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Non-fatal, Link 46 egress non-posted PRIV error (First)", true, -1, 0,
			"nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Non-fatal, Link 46 egress non-posted PRIV error (First)"},
		{"bare, CRLF", xid79 + "\r", true, -1, 0, xid79},
		{"empty", "", false, 0, 0, ""},
		{"blank", "   \t", false, 0, 0, ""},
		{"not a record", "4,1;short", true, -1, 0, "4,1;short"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			r, ok := ParseText(tc.in)
			if ok != tc.ok || (ok && (r.Level != tc.level || r.TimeUsec != tc.usec || r.Text != tc.text)) {
				t.Errorf("ParseText(%q) = %+v, %v; want level %d usec %d text %q ok %v", tc.in, r, ok, tc.level, tc.usec, tc.text, tc.ok)
			}
		})
	}
}

// A whole saved log: records numbered in the file's order, a /dev/kmsg
// record's dictionary skipped and its continuation joined, formats mixed
// line by line.
func TestParseReplay(t *testing.T) {
	file := strings.Join([]string{
		"6,812,5331123,-;pci 0000:3b:00.0: [10de:2330] type 00 class 0x030200",
		" SUBSYSTEM=pci",
		" DEVICE=+pci:0000:3b:00.0",
		"4,2218,7215402840,-;NVRM: Xid (PCI:0000:3b:00): ",
		"4,2219,7215402841,c;79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
		"",
		"Mar  5 22:23:56 gpu001 systemd[1]: Started Session 4 of user root.",
		"[  219.470123] nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Non-fatal, Link 46 egress non-posted PRIV error (First)",
		"  indented bare line",
	}, "\n")
	recs := ParseReplay(file)
	lines, hold := Lines(recs)
	got := dumpLines(lines)
	want := `0/6:"pci 0000:3b:00.0: [10de:2330] type 00 class 0x030200" 1/4:"` + xid79[:len("NVRM: Xid (PCI:0000:3b:00): ")] +
		`79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." ` +
		`3/-1:"nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Non-fatal, Link 46 egress non-posted PRIV error (First)" 4/-1:"  indented bare line" `
	if got != want || hold != nil {
		t.Errorf("lines %s (hold %v)\nwant  %s", got, hold, want)
	}
}

// --kernel-log's file: every line new, under a boot id of the file's own;
// only a regular file, of bounded size.
func TestReplay(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "dmesg.txt")
	if err := os.WriteFile(p, []byte("[    0.000000] Linux version 6.8.0\n[  219.470123] "+xid79+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := Replay(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(src.BootID(), "replay-") {
		t.Errorf("boot id %q", src.BootID())
	}
	again, _ := Replay(p)
	if again.BootID() != src.BootID() {
		t.Errorf("same file, boot ids %q and %q", src.BootID(), again.BootID())
	}
	// With no cursor: every line is new (not a fresh start at the end).
	l := NewLog(src, statefileDir(t))
	snap := l.Snapshot(context.Background())
	if snap.Fresh || fmt.Sprint(texts(snap.Lines)) != "[Linux version 6.8.0 "+xid79+"]" {
		t.Fatalf("replay: %+v", snap)
	}

	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err == nil {
		if _, err := Replay(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("fifo: %v", err)
		}
	}
	if _, err := Replay("/dev/null"); err == nil {
		t.Error("a device was accepted")
	}
	if _, err := Replay(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file was accepted")
	}
	big := filepath.Join(dir, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxReplay + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := Replay(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
}

// The parsers take any text a log or a bug report holds: no panic, and
// what they accept keeps its invariants.
func FuzzParseText(f *testing.F) {
	for _, s := range []string{"", "\r", "[", "[ 1.] x", "<999>[1.1]", "<4>", "kern  :warn  : ", "Mar  5 22:23:56 h kernel:",
		"2024-03-05T22:23:56Z h kernel: [99999999999999999999.1] x", "4,1,1,-;x", "4,1,1,c,caller=T1;\\x", xid79,
		"[Tue Mar  5 22:23:56 2024] " + xid79, "Mar  5 22:23:56 gpu001 kernel: [  219.470123] " + xid79} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, ok := ParseText(s)
		if !ok {
			return
		}
		if r.Level < -1 || r.Level > 7 || r.Facility < 0 {
			t.Fatalf("ParseText(%q) = %+v", s, r)
		}
		if strings.Contains(r.Text, "\n") && !strings.Contains(s, `\x0a`) && !strings.Contains(s, `\x0A`) && !strings.Contains(s, "\n") {
			t.Fatalf("ParseText(%q) made a newline: %+v", s, r)
		}
		recs := ParseReplay(s)
		for i, r := range recs {
			if r.Seq != uint64(i) {
				t.Fatalf("ParseReplay(%q): record %d has seq %d", s, i, r.Seq)
			}
		}
		Lines(recs)
	})
}

func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{"", ";", "4,1,1,c;", "4,1,1,-;NVRM: Xid (PCI:0000:4e:00): \n 4,2,1,c;79, x", `4,1,1,-;a\x0ab`,
		"4,18446744073709551615,1,-;x", "4,1,1,+,caller=;x\n ", "4,1,1,c,caller=T1,extra;\\x", "99999,1,1,-;x"} {
		f.Add(s)
	}
	for _, name := range []string{"kmsg-h100.txt", "kmsg-a100-split.txt", "kmsg-el7-v100-old.txt"} {
		if b, err := os.ReadFile("testdata/" + name); err == nil {
			f.Add(string(b))
		}
	}
	f.Fuzz(func(t *testing.T, dump string) {
		var recs []Record
		b := Batch{}
		for _, s := range SplitRecords(dump) {
			r, err := ParseRecord(s)
			b.add(s, 0)
			if seq, ok := headSeq([]byte(s)); err == nil && (!ok || seq != r.Seq) {
				// The device read skips records before the cursor on
				// headSeq alone: it must read what ParseRecord reads.
				t.Fatalf("headSeq(%q) = %d, %v; ParseRecord seq %d", s, seq, ok, r.Seq)
			}
			if err != nil {
				continue
			}
			if r.Facility < 0 || r.Level < 0 || r.Level > 7 {
				t.Fatalf("ParseRecord(%q) = %+v", s, r)
			}
			if back, err := ParseRecord(r.String()); err != nil || back != r {
				t.Fatalf("round trip of %+v: %q → %+v, %v", r, r.String(), back, err)
			}
			recs = append(recs, r)
		}
		if b.Seen != len(recs) {
			t.Fatalf("batch saw %d, parsed %d", b.Seen, len(recs))
		}
		lines, hold := Lines(recs)
		if hold != nil && len(recs) == 0 {
			t.Fatalf("hold %d without records", *hold)
		}
		for _, l := range lines {
			if strings.Contains(l.Text, "\n") {
				t.Fatalf("line with a newline: %q", l.Text)
			}
		}
	})
}

func statefileDir(t *testing.T) statefile.Dir { return statefile.Dir{Path: t.TempDir()} }

// The test helpers other rules' tests use: the lines of a pasted log, the
// same snapshot for every caller, and who said Judged.
func TestFixed(t *testing.T) {
	lines := ReplayLines("Mar  5 22:23:56 gpu001 kernel: [  219.470123] " + xid79 + "\nMar  5 22:23:56 gpu001 sshd[1]: x\n")
	if len(lines) != 1 || lines[0].Text != xid79 || lines[0].Level != -1 || lines[0].TimeUsec != 219470123 {
		t.Fatalf("lines %+v", lines)
	}
	f := &Fixed{Snap: Snapshot{BootID: "b", Lines: lines}}
	var r Reader = f
	if s := r.Snapshot(context.Background()); s.BootID != "b" || len(s.Lines) != 1 {
		t.Errorf("snapshot %+v", s)
	}
	r.Judged("gpu.xid")
	if got := fmt.Sprint(f.JudgedBy()); got != "[gpu.xid]" {
		t.Errorf("judged %s", got)
	}
}
