package sxid

import (
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
)

// The table as the guide has it: how many codes per section, no code
// twice, and the rows the architecture page and the corpus lean on.
func TestTablePinned(t *testing.T) {
	count := map[Class]int{}
	seen := map[int]bool{}
	for _, c := range Table {
		if seen[c.Code] {
			t.Errorf("SXid %d twice", c.Code)
		}
		seen[c.Code] = true
		count[c.Class]++
		if c.Name == "" || c.Means == "" {
			t.Errorf("SXid %d: empty name or meaning", c.Code)
		}
	}
	want := map[Class]int{NonFatal: 25, Fatal: 42, AlwaysFatal: 20, Notable: 6}
	for cl, n := range want {
		if count[cl] != n {
			t.Errorf("class %d: %d codes, want %d", cl, count[cl], n)
		}
	}
	for _, tt := range []struct {
		code  int
		class Class
	}{
		{12028, NonFatal}, {19084, NonFatal}, {11012, NonFatal}, {20001, NonFatal},
		{20034, Fatal}, {24007, Fatal}, {22012, Fatal}, {12030, Fatal},
		{12020, AlwaysFatal}, {22003, AlwaysFatal}, {23017, AlwaysFatal},
		{10002, Notable}, {20009, Notable},
	} {
		if c, ok := Lookup(tt.code); !ok || c.Class != tt.class {
			t.Errorf("SXid %d: %+v %v, want class %d", tt.code, c, ok, tt.class)
		}
	}
	if _, ok := Lookup(28006); ok {
		t.Error("28006 is not in the guide")
	}
}

func TestVerdict(t *testing.T) {
	for _, tt := range []struct {
		name string
		e    Event
		want check.Status
	}{
		{"fatal code, fatal word", Event{Code: 20034, Said: true, Fatal: true}, check.Fail},
		{"fatal code, no word", Event{Code: 20034}, check.Fail},
		{"always fatal", Event{Code: 23001}, check.Fail},
		{"non-fatal code, non-fatal word", Event{Code: 12028, Said: true}, check.Warn},
		{"non-fatal code the driver calls fatal", Event{Code: 12028, Said: true, Fatal: true}, check.Fail},
		{"notable, fatal word", Event{Code: 10003, Said: true, Fatal: true}, check.Fail},
		{"notable, no word", Event{Code: 10002}, check.Warn},
		{"unlisted, fatal word", Event{Code: 29999, Said: true, Fatal: true}, check.Fail},
		{"unlisted, non-fatal word", Event{Code: 28006, Said: true}, check.Warn},
		{"unlisted, no word", Event{Code: 26006}, check.Warn},
	} {
		if st, act := Verdict(tt.e); st != tt.want || (st == check.Fail) != (act == check.ActionResetGPU) {
			t.Errorf("%s: %s %s, want %s", tt.name, st, act, tt.want)
		}
	}
}

func TestParseLine(t *testing.T) {
	for _, tt := range []struct {
		line string
		want Event
		ok   bool
	}{
		{"nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)",
			Event{Switch: 1, PCI: "0000:84:00.0", Code: 12028, Said: true, Link: 32, Desc: "egress non-posted PRIV error"}, true},
		{"nvidia-nvswitch0: SXid (PCI:0000:C2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up",
			Event{Switch: 0, PCI: "0000:c2:00.0", Code: 20034, Said: true, Fatal: true, Link: 28, Desc: "LTSSM Fault Up"}, true},
		{"nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 22003, Fatal, Minion Halt",
			Event{Switch: 1, PCI: "0000:84:00.0", Code: 22003, Said: true, Fatal: true, Link: -1, Desc: "Minion Halt"}, true},
		{"nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 37 Sub-engine instance 00",
			Event{Switch: 2, PCI: "0000:07:00.0", Code: 20034, Link: -1, FollowUp: true}, true},
		{"nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALTED",
			Event{Switch: 0, PCI: "0004:00:00.0", Code: 26006, Link: -1, Desc: "SOE HALTED"}, true},
		{"NVRM: Xid (PCI:0000:91:00): 79, GPU has fallen off the bus.", Event{}, false},
		{"nvidia-nvswitch0: SXid (PCI:0000:00:00.0): xyz, Fatal error", Event{}, false},
		{"nvidia-nvswitch0: SXid (PCI:0000:00:00.0): 0, Fatal", Event{}, false},
		{"user: nvidia-nvswitch0: SXid (PCI:0000:84:00.0): 20034, Fatal, Link 1 x", Event{}, false},
	} {
		got, ok := ParseLine(tt.line)
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseLine(%q) = %+v %v, want %+v %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}
