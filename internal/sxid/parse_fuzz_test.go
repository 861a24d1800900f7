package sxid

import (
	"os"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/pciaddr"
)

// Any kernel line: no panic, and an accepted SXid names a switch, a code
// of at most 5 digits and a sysfs PCI address, with one line of words.
func FuzzParseLine(f *testing.F) {
	corpus, _ := os.ReadFile("testdata/sxid.txt")
	for _, l := range strings.Split(string(corpus), "\n") {
		if _, text, ok := strings.Cut(l, " | "); ok {
			f.Add(text)
		}
	}
	for _, s := range []string{"", "nvidia-nvswitch", "nvidia-nvswitch0: SXid (PCI:0000:84:00.0): 0, x",
		"nvidia-nvswitch99999999999999999999: SXid (PCI:0000:84:00.0): 1, x", "nvidia-nvswitch0: SXid (PCI:00000000:84:00): 99999, Link 99999999999999999999 x",
		"nvidia-nvswitch0: SXid (PCI:0000:84:00.0): 12028, fatal, Link 1 (First)(First)", "nvidia-nvswitch0: SXid (PCI:0000:84:00.0): 1, \n2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, ok := ParseLine(s)
		if !ok {
			return
		}
		if e.Switch < 0 || e.Code < 1 || e.Code > 99999 || e.Link < -1 || !pciaddr.IsSysfs(e.PCI) ||
			strings.Contains(e.Desc, "\n") || !strings.Contains(s, "SXid") || (e.FollowUp && (e.Said || e.Desc != "")) {
			t.Fatalf("ParseLine(%q) accepted %+v", s, e)
		}
	})
}
