package xid

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/kmsg"
)

// The kernel log is text anyone's driver bug can fill. Whatever it holds,
// the parsers must not panic, and what they accept must make sense.
// `go test` runs the seeds; `go test -fuzz=FuzzX` more.

// normalPCI: an event's address is a sysfs name, a 5-digit VMD domain
// included ("10000:01:00.0", see xidLine).
var normalPCI = regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

func seedFixtures(f *testing.F, extra ...string) {
	for _, name := range []string{"kmsg-h100.txt", "kmsg-a100-split.txt", "kmsg-el7-v100-old.txt"} {
		if b, err := os.ReadFile("../kmsg/testdata/" + name); err == nil {
			f.Add(string(b))
		}
	}
	for _, s := range extra {
		f.Add(s)
	}
}

func FuzzParseLine(f *testing.F) {
	seedFixtures(f, "", "NVRM: Xid (PCI:0000:4e:00): 79, x", "NVRM: Xid (0000:4e:00): 13,", "NVRM: Xid (PCI:00000000:4E:00.7): 999",
		"NVRM: Xid (PCI:0000:4e:00): 0", "NVRM: Xid (PCI:0000:4e:00): 1000, x", "NVRM: Xid (", "NVRM: Xid (PCI:0000:4e:00): \xff, x")
	f.Fuzz(func(t *testing.T, s string) {
		e, ok := ParseLine(s)
		if !ok {
			return
		}
		if e.XID < 1 || e.XID > 999 || !normalPCI.MatchString(e.PCI) || !strings.Contains(s, "Xid") {
			t.Fatalf("ParseLine(%q) accepted %+v", s, e)
		}
	})
}

func FuzzEvents(f *testing.F) {
	seedFixtures(f, "", "\n", ";", "4,1,1,c;", "4,1,1,-;NVRM: Xid (PCI:0000:4e:00): \n4,2,1,c;79, x",
		`4,1,1,-;a\x0aNVRM: Xid (PCI:0000:4e:00): 79, x`, "4,18446744073709551615,1,-;NVRM: Xid (PCI:0000:4e:00): 79, x",
		"4,1,1,+,caller=;x\n ", "4,1,1,c,caller=T1,extra;\\x")
	f.Fuzz(func(t *testing.T, dump string) {
		var recs []kmsg.Record
		for _, s := range kmsg.SplitRecords(dump) {
			if r, err := kmsg.ParseRecord(s); err == nil {
				recs = append(recs, r)
			}
		}
		events, hold := eventsOf(recs)
		for _, e := range events {
			if e.XID < 1 || e.XID > 999 || !normalPCI.MatchString(e.PCI) {
				t.Fatalf("event %+v from %q", e, dump)
			}
		}
		if hold != nil && len(recs) == 0 {
			t.Fatalf("hold %d without records", *hold)
		}
	})
}
