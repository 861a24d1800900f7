package xid

import (
	"context"
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
