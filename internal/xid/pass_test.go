package xid

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// withPass is gpu.xid as one run of a program has it: a kernel-log pass
// of its own over src (a fresh kmsg.Log each Run, as each run of the
// binary builds one), with gpu.xid registered, committed after the check.
type withPass struct {
	node *gpu.Node
	cfg  config.XID
	dir  statefile.Dir
	src  kmsg.Source
}

func newPass(n *gpu.Node, c config.XID, dir statefile.Dir, src kmsg.Source) check.Check {
	return withPass{n, c, dir, src}
}

func (w withPass) Name() string { return Name }

func (w withPass) Run(ctx context.Context) []check.Result {
	log := kmsg.NewLog(w.src, w.dir)
	c := New(w.node, w.cfg, w.dir, log)
	log.Register(c.Name())
	rs := c.Run(ctx)
	_, _ = log.Commit() // the program logs a failure; the tests read the file
	return rs
}

// cursorOf is the kernel-log pass's saved cursor in dir.
func cursorOf(t *testing.T, dir statefile.Dir) (boot string, next uint64) {
	t.Helper()
	var c struct {
		BootID string `json:"boot_id"`
		Next   uint64 `json:"next_seq"`
	}
	if err := dir.Load(kmsg.CursorFile, &c); err != nil {
		t.Fatalf("cursor: %v", err)
	}
	return c.BootID, c.Next
}

// eventsOf are the XIDs in records, through the pass's line rebuilding.
func eventsOf(recs []kmsg.Record) ([]Event, *uint64) {
	lines, hold := kmsg.Lines(recs)
	return Events(lines), hold
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// gpu.xid says Judged once it has saved its state, a SKIP included, and
// not when it could not save it (the lines must come again); Fresh and
// Err snapshots are reported as the pass says.
func TestJudged(t *testing.T) {
	m := machine(t, "dgxh100")
	node := gpu.NewNode(m.Server, "", -1, m.Model.Name, gpu.WithBus(m.OnBus))
	lines := kmsg.ReplayLines("[ 7215.402840] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")
	f := &kmsg.Fixed{Snap: kmsg.Snapshot{BootID: m.BootID, Lines: lines}}
	rs := run(New(node, defaults(), statefile.Dir{Path: t.TempDir()}, f))
	if len(f.JudgedBy()) != 1 || rs[3].Status != check.Fail || rs[3].Component != "gpu3" {
		t.Errorf("judged %v, %v", f.JudgedBy(), summary(rs))
	}
	notDir := filepath.Join(t.TempDir(), "file")
	mustWrite(t, notDir, "")
	f = &kmsg.Fixed{Snap: kmsg.Snapshot{BootID: m.BootID, Lines: lines}}
	run(New(node, defaults(), statefile.Dir{Path: notDir}, f))
	if len(f.JudgedBy()) != 0 {
		t.Errorf("judged without saving: %v", f.JudgedBy())
	}
	f = &kmsg.Fixed{Snap: kmsg.Snapshot{BootID: m.BootID, Fresh: true}}
	if rs := run(New(node, defaults(), statefile.Dir{Path: t.TempDir()}, f)); rs[0].Message != kmsg.Started || len(f.JudgedBy()) != 1 {
		t.Errorf("fresh: %v, judged %v", summary(rs), f.JudgedBy())
	}
	f = &kmsg.Fixed{Snap: kmsg.Snapshot{BootID: m.BootID, Err: errors.New("EIO")}}
	if rs := run(New(node, defaults(), statefile.Dir{Path: t.TempDir()}, f)); rs[0].Status != check.Error ||
		rs[0].Message != "cannot read the kernel log: EIO" || len(f.JudgedBy()) != 0 {
		t.Errorf("unreadable: %v, judged %v", summary(rs), f.JudgedBy())
	}
}
