package xid

import "testing"

// The PCI domain of an XID line has 4 to 8 hex digits: 4 as drivers
// write it, 5 behind an Intel VMD controller, 8 as NVML pads it. The
// address comes back as sysfs names the device.
func TestParseLineDomains(t *testing.T) {
	for _, tc := range []struct {
		line string
		pci  string
		ok   bool
	}{
		{"NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", "0000:4e:00.0", true},
		{"NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008)", "0018:01:00.0", true},
		{"NVRM: Xid (PCI:10000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", "10000:01:00.0", true},
		{"NVRM: Xid (PCI:1000A:E1:00): 48, DBE", "1000a:e1:00.0", true},
		{"NVRM: Xid (PCI:00010000:01:00): 79, GPU has fallen off the bus.", "10000:01:00.0", true},
		{"NVRM: Xid (00000000:4E:00): 13, Graphics Exception", "0000:4e:00.0", true},
		{"NVRM: Xid (PCI:0000:4e:00.0): 13, Graphics Exception", "0000:4e:00.0", true},
		{"NVRM: Xid (PCI:000:4e:00): 79, three digits", "", false},
		{"NVRM: Xid (PCI:000000000:4e:00): 79, nine digits", "", false},
		{"NVRM: Xid (PCI:10000:1:00): 79, one-digit bus", "", false},
	} {
		e, ok := ParseLine(tc.line)
		if ok != tc.ok || e.PCI != tc.pci {
			t.Errorf("%q: %q %v, want %q %v", tc.line, e.PCI, ok, tc.pci, tc.ok)
		}
	}
}
