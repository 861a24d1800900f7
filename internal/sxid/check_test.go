package sxid

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/kernlog/kernlogtest"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

type node struct {
	cfg  config.SXid
	dir  statefile.Dir
	seqs kernlogtest.Seqs
}

func newNode(t *testing.T) *node {
	return &node{cfg: config.Default().Checks.Fabric.SXid, dir: statefile.Dir{Path: t.TempDir()}}
}

func (n *node) run(s kmsg.Snapshot) []check.Result {
	return New(n.cfg, n.dir, &kernlogtest.Reader{Snap: n.seqs.Number(s)}).Run(context.Background())
}

func TestCorpus(t *testing.T) {
	cases := kernlogtest.ReadCorpus(t, "testdata/sxid.txt")
	for _, c := range cases {
		t.Run(c.Where, func(t *testing.T) {
			kernlogtest.Judge(t, c, newNode(t).run(kernlogtest.Replay("b", c.Text)))
		})
	}
}

// The driver's lines of one event come as a first line and its severity
// and data lines: one error each, counted per switch and code.
func TestFollowUpLines(t *testing.T) {
	res := newNode(t).run(kernlogtest.Replay("b",
		"nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up",
		"nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 63 LTSSM Fault Up",
		"nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 60 Sub-engine instance 00",
		"nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Data {0x10000000, 0x10000000, 0x00000000}",
		"nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Fatal, Link 37 LTSSM Fault Up",
		"nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 62 LTSSM Fault Up",
		"nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 37 Sub-engine instance 00",
		"nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Severity 1 Engine instance 62 Sub-engine instance 00",
	))
	want := map[string]string{
		"0000:05:00.0": "nvswitch0 link 63: SXid 20034 LTSSM Fault Up (fatal): reset every GPU and NVSwitch of the fabric together (2 this boot)",
		"0000:06:00.0": "nvswitch1 link 48: SXid 20034 LTSSM Fault Up (fatal): reset every GPU and NVSwitch of the fabric together (1 this boot)",
		"0000:07:00.0": "nvswitch2 link 37: SXid 20034 LTSSM Fault Up (fatal): reset every GPU and NVSwitch of the fabric together (1 this boot)",
	}
	if len(res) != len(want) {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res {
		if r.Status != check.Fail || r.Action != check.ActionResetGPU || r.Message != want[r.Component] || r.IDs.PCIBusID != r.Component {
			t.Errorf("%s: %s %s %q, want FAIL reset-gpu %q", r.Component, r.Status, r.Action, r.Message, want[r.Component])
		}
	}
}

// Non-fatal: WARN, counted across runs; then OK. Fatal: held for the
// boot, word for word; a new boot clears it.
func TestCountAndSticky(t *testing.T) {
	n := newNode(t)
	nonFatal := "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)"
	w := n.run(kernlogtest.Replay("b", nonFatal, nonFatal))
	if len(w) != 1 || w[0].Status != check.Warn ||
		w[0].Message != "nvswitch3 link 32: SXid 12028 egress non-posted PRIV error (non-fatal) (2 this boot)" {
		t.Fatalf("two non-fatal: %+v", w)
	}
	if w = n.run(kernlogtest.Replay("b", nonFatal)); !strings.HasSuffix(w[0].Message, "(3 this boot)") {
		t.Errorf("third: %+v", w)
	}
	if ok := n.run(kernlogtest.Replay("b")); len(ok) != 1 || ok[0].Status != check.OK || ok[0].Message != "no NVSwitch SXid errors" {
		t.Errorf("quiet run: %+v", ok)
	}
	f := n.run(kernlogtest.Replay("b", "nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 28 sourcetrack timeout error (First)"))
	for range 2 {
		if again := n.run(kernlogtest.Replay("b")); !reflect.DeepEqual(again, f) {
			t.Errorf("same boot:\n got  %+v\n want %+v", again, f)
		}
	}
	if after := n.run(kernlogtest.Replay("c")); len(after) != 1 || after[0].Status != check.OK {
		t.Errorf("new boot: %+v", after)
	}
}

func TestOverride(t *testing.T) {
	nonFatal := "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)"
	fatal := "nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up"
	tests := []struct {
		name   string
		over   config.SXidOverride
		line   string
		status check.Status
		action check.Action
	}{
		{"non-fatal to fail", config.SXidOverride{Code: 12028, Status: "fail", Action: "reset-gpu"}, nonFatal, check.Fail, check.ActionResetGPU},
		{"fatal to warn", config.SXidOverride{Code: 20034, Status: "warn"}, fatal, check.Warn, check.ActionNone},
		{"silenced", config.SXidOverride{Code: 20034, Status: "ok"}, fatal, check.OK, check.ActionNone},
		{"action only", config.SXidOverride{Code: 20034, Action: "reboot"}, fatal, check.Fail, check.ActionReboot},
		{"another code", config.SXidOverride{Code: 12028, Status: "ok"}, fatal, check.Fail, check.ActionResetGPU},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t)
			n.cfg.Override = []config.SXidOverride{tt.over}
			r := n.run(kernlogtest.Replay("b", tt.line))
			if len(r) != 1 || r[0].Status != tt.status || r[0].Action != tt.action {
				t.Errorf("got %+v, want %s %s", r, tt.status, tt.action)
			}
		})
	}
}

func TestReadError(t *testing.T) {
	n := newNode(t)
	f := n.run(kernlogtest.Replay("b", "nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up"))
	res := n.run(kmsg.Snapshot{BootID: "b", Err: context.DeadlineExceeded})
	if len(res) != 2 || res[0].Status != check.Error || !reflect.DeepEqual(res[1], f[0]) {
		t.Errorf("read error: %+v", res)
	}
	if fresh := newNode(t).run(kmsg.Snapshot{BootID: "b", Fresh: true}); len(fresh) != 1 || fresh[0].Message != kmsg.Started {
		t.Errorf("fresh: %+v", fresh)
	}
}
