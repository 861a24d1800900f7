package kmsg

import "testing"

func TestParseRecord(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Record
		bad  bool
	}{
		{"4,2218,7215402840,-;NVRM: Xid (PCI:0000:5d:00): 79, x\n", Record{Facility: 0, Level: 4, Seq: 2218, TimeUsec: 7215402840, Flags: "-", Text: "NVRM: Xid (PCI:0000:5d:00): 79, x"}, false},
		{"12,7,1,-;forged", Record{Facility: 1, Level: 4, Seq: 7, TimeUsec: 1, Flags: "-", Text: "forged"}, false},
		{"6,812,5331123,-;pci 0000:18:00.0: x\n SUBSYSTEM=pci\n DEVICE=+pci:0000:18:00.0\n", Record{Level: 6, Seq: 812, TimeUsec: 5331123, Flags: "-", Text: "pci 0000:18:00.0: x"}, false},
		{"4,1850,9,c,caller=T5120;79, y", Record{Level: 4, Seq: 1850, TimeUsec: 9, Flags: "c", Caller: "T5120", Text: "79, y"}, false},
		{`4,1,2,-;a\x0ab\x5cc\x`, Record{Level: 4, Seq: 1, TimeUsec: 2, Flags: "-", Text: "a\nb\\c\\x"}, false},
		{"4,1,2;no flags", Record{Level: 4, Seq: 1, TimeUsec: 2, Flags: "-", Text: "no flags"}, false},
		{"4,1,2,-;with; semicolon", Record{Level: 4, Seq: 1, TimeUsec: 2, Flags: "-", Text: "with; semicolon"}, false},
		{"no header", Record{}, true},
		{"4,1;short", Record{}, true},
		{"x,1,2,-;bad pri", Record{}, true},
		{"4,-1,2,-;bad seq", Record{}, true},
		{"99999999,1,2,-;huge pri", Record{}, true},
	} {
		r, err := ParseRecord(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && r != tc.want) {
			t.Errorf("ParseRecord(%q) = %+v, %v; want %+v", tc.in, r, err, tc.want)
		}
		if err == nil {
			if back, err := ParseRecord(r.String()); err != nil || back != r {
				t.Errorf("round trip of %+v: %q → %+v, %v", r, r.String(), back, err)
			}
		}
	}
}
