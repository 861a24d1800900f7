package kernlog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/kernlog/kernlogtest"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

func defaults() config.Kernel { return config.Default().Checks.Kernel }

func newCheck(t *testing.T, c config.Kernel, p *Paths, r kmsg.Reader) check.Check {
	t.Helper()
	return New(c, p, statefile.Dir{Path: t.TempDir()}, r)
}

// node is a host.kernel check whose state lives across runs; run judges
// one snapshot.
type node struct {
	t     *testing.T
	cfg   config.Kernel
	paths *Paths
	dir   statefile.Dir
	seqs  kernlogtest.Seqs
}

func newNode(t *testing.T) *node {
	return &node{t: t, cfg: defaults(), dir: statefile.Dir{Path: t.TempDir()}}
}

func (n *node) run(s kmsg.Snapshot) ([]check.Result, *fakeReader) {
	r := &fakeReader{Snap: n.seqs.Number(s)}
	return New(n.cfg, n.paths, n.dir, r).Run(context.Background()), r
}

func one(t *testing.T, res []check.Result) check.Result {
	t.Helper()
	if len(res) != 1 {
		t.Fatalf("want one result, got %+v", res)
	}
	return res[0]
}

const (
	lockup  = "watchdog: BUG: soft lockup - CPU#2 stuck for 22s! [chia_plot:29632]"
	ioErr   = "I/O error, dev nvme0n1, sector 131209936 op 0x0:(READ) flags 0x80700 phys_seg 25 prio class 0"
	hung    = "INFO: task kworker/2:1:5747 blocked for more than 120 seconds."
	aerNon  = "pcieport %s: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)"
	healthy = "no host faults in the kernel log"
)

func TestNamesMatchConfig(t *testing.T) {
	if got := Names(); !slices.Equal(got, config.KernelRules) {
		t.Errorf("rule names %q, config.KernelRules %q", got, config.KernelRules)
	}
}

// A FAIL is repeated word for word for the rest of the boot, and a new
// boot id clears it.
func TestStickyForTheBoot(t *testing.T) {
	n := newNode(t)
	first := one(t, must(n.run(replay("boot-1", lockup))))
	if first.Status != check.Fail || first.Action != check.ActionReboot || first.Component != "cpu2" {
		t.Fatalf("soft lockup: %+v", first)
	}
	for range 3 {
		again := one(t, must(n.run(replay("boot-1"))))
		if !reflect.DeepEqual(again, first) {
			t.Errorf("same boot, no lines:\n got  %+v\n want %+v", again, first)
		}
	}
	after := one(t, must(n.run(replay("boot-2"))))
	if after.Status != check.OK || after.Component != "host" || after.Message != healthy {
		t.Errorf("new boot: %+v", after)
	}
}

// A WARN is reported by the run that sees the line, then the node is OK.
func TestWarnOnce(t *testing.T) {
	n := newNode(t)
	w := one(t, must(n.run(replay("b", hung))))
	if w.Status != check.Warn || w.Component != "kernel" || !strings.HasSuffix(w.Message, "(1 this boot)") {
		t.Fatalf("hung kworker: %+v", w)
	}
	if ok := one(t, must(n.run(replay("b")))); ok.Status != check.OK {
		t.Errorf("next run: %+v", ok)
	}
	w = one(t, must(n.run(replay("b", hung))))
	if !strings.HasSuffix(w.Message, "(2 this boot)") {
		t.Errorf("second sighting: %+v", w)
	}
}

// 500 lines of one problem are one episode, with a count; a FAIL keeps
// its first line's message as new lines come.
func TestOneEpisode(t *testing.T) {
	n := newNode(t)
	lines := make([]string, 500)
	for i := range lines {
		lines[i] = hung
	}
	w := one(t, must(n.run(replay("b", lines...))))
	if w.Status != check.Warn || !strings.HasSuffix(w.Message, "(500 this boot)") {
		t.Errorf("500 hung-task lines: %+v", w)
	}

	f := one(t, must(n.run(replay("b", ioErr, ioErr, ioErr))))
	if f.Status != check.Fail || f.Component != "nvme0n1" || !strings.HasSuffix(f.Message, "(3 this boot)") {
		t.Fatalf("3 I/O errors: %+v", f)
	}
	other := "I/O error, dev nvme0n1, sector 4217392 op 0x1:(WRITE) flags 0x9800 phys_seg 7 prio class 2"
	g := one(t, must(n.run(replay("b", other))))
	if want := strings.Replace(f.Message, "(3 this boot)", "(4 this boot)", 1); g.Message != want {
		t.Errorf("a 4th line:\n got  %s\n want %s", g.Message, want)
	}
}

// Two rules on one component: one result, the worse, naming the other.
func TestOneResultPerComponent(t *testing.T) {
	n := newNode(t)
	res := must(n.run(replay("b",
		"Aborting journal on device sdk-8.",
		"EXT4-fs (sdk): Remounting filesystem read-only",
		"XFS (dm-4): I/O Error Detected. Shutting down filesystem")))
	if len(res) != 2 || res[0].Component != "dm-4" || res[1].Component != "sdk" {
		t.Fatalf("results: %+v", res)
	}
	if !strings.Contains(res[1].Message, "; also ") {
		t.Errorf("sdk: %q does not name the other rule", res[1].Message)
	}
}

func TestDisableAndOverride(t *testing.T) {
	tests := []struct {
		name   string
		cfg    func(*config.Kernel)
		line   string
		status check.Status
		action check.Action
	}{
		{"default", func(*config.Kernel) {}, lockup, check.Fail, check.ActionReboot},
		{"disabled", func(c *config.Kernel) { c.Disable = []string{"soft_lockup"} }, lockup, check.OK, check.ActionNone},
		{"other rule disabled", func(c *config.Kernel) { c.Disable = []string{"hung_task"} }, lockup, check.Fail, check.ActionReboot},
		{"to warn", func(c *config.Kernel) {
			c.Override = []config.KernelOverride{{Rule: "soft_lockup", Status: "warn", Action: "none"}}
		}, lockup, check.Warn, check.ActionNone},
		{"action only", func(c *config.Kernel) {
			c.Override = []config.KernelOverride{{Rule: "soft_lockup", Action: "drain"}}
		}, lockup, check.Fail, check.ActionDrain},
		{"silenced", func(c *config.Kernel) {
			c.Override = []config.KernelOverride{{Rule: "io_error", Status: "ok"}}
		}, ioErr, check.OK, check.ActionNone},
		{"warn to fail", func(c *config.Kernel) {
			c.Override = []config.KernelOverride{{Rule: "hung_task", Status: "fail"}}
		}, hung, check.Fail, check.ActionDrain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t)
			tt.cfg(&n.cfg)
			r := one(t, must(n.run(replay("b", tt.line))))
			if r.Status != tt.status || r.Action != tt.action {
				t.Errorf("got %s %s (%s), want %s %s", r.Status, r.Action, r.Message, tt.status, tt.action)
			}
			// An overridden FAIL is sticky too; a WARN is not.
			r = one(t, must(n.run(replay("b"))))
			if (r.Status == check.Fail) != (tt.status == check.Fail) {
				t.Errorf("next run: %+v", r)
			}
		})
	}
}

// A log that cannot be read is an ERROR, and the boot's FAILs stay.
func TestReadErrorKeepsSticky(t *testing.T) {
	n := newNode(t)
	f := one(t, must(n.run(replay("b", lockup))))
	res, r := n.run(kmsg.Snapshot{BootID: "b", Err: errors.New("read /dev/kmsg: EIO")})
	if len(res) != 2 || res[0].Component != "host" || res[0].Status != check.Error ||
		!strings.Contains(res[0].Message, "cannot read the kernel log: read /dev/kmsg: EIO") || !reflect.DeepEqual(res[1], f) {
		t.Errorf("read error: %+v", res)
	}
	if len(r.JudgedBy()) != 0 {
		t.Errorf("judged %q after a read error", r.JudgedBy())
	}
	// Without a sticky FAIL: the ERROR alone.
	res, _ = newNode(t).run(kmsg.Snapshot{BootID: "b", Err: errors.New("EIO")})
	if one(t, res).Status != check.Error {
		t.Errorf("read error, nothing held: %+v", res)
	}
}

func TestFreshStart(t *testing.T) {
	n := newNode(t)
	res, r := n.run(kmsg.Snapshot{BootID: "b", Fresh: true})
	if got := one(t, res); got.Status != check.OK || got.Message != kmsg.Started {
		t.Errorf("fresh: %+v", got)
	}
	if !slices.Equal(r.JudgedBy(), []string{Name}) {
		t.Errorf("judged %q", r.JudgedBy())
	}
	// A fresh cursor in the middle of a boot keeps what the boot holds.
	f := one(t, must(n.run(replay("b", lockup))))
	if got := one(t, must(n.run(kmsg.Snapshot{BootID: "b", Fresh: true}))); !reflect.DeepEqual(got, f) {
		t.Errorf("fresh with a sticky FAIL: %+v", got)
	}
}

func TestJudgedAndSaved(t *testing.T) {
	n := newNode(t)
	_, r := n.run(replay("b", lockup))
	if !slices.Equal(r.JudgedBy(), []string{Name}) {
		t.Errorf("judged %q", r.JudgedBy())
	}
	if _, err := os.Stat(filepath.Join(n.dir.Path, StateFile)); err != nil {
		t.Error(err)
	}
	// A dry run (read-only state) judges, saves nothing, holds nothing.
	ro := &node{t: t, cfg: defaults(), dir: statefile.Dir{Path: t.TempDir(), ReadOnly: true}}
	if got := one(t, must(ro.run(replay("b", lockup)))); got.Status != check.Fail {
		t.Errorf("dry run: %+v", got)
	}
	if got := one(t, must(ro.run(replay("b")))); got.Status != check.OK {
		t.Errorf("dry run keeps nothing: %+v", got)
	}
}

// A state that cannot be saved is an ERROR, and the lines are not
// reported as judged, so that the next run sees them again.
func TestSaveError(t *testing.T) {
	// The state directory is a file: nothing can be saved in it.
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, cfg: defaults(), dir: statefile.Dir{Path: dir}}
	res, r := n.run(replay("b", lockup))
	if len(res) != 2 || res[0].Status != check.Error || res[1].Status != check.Fail {
		t.Errorf("save error: %+v", res)
	}
	if len(r.JudgedBy()) != 0 {
		t.Errorf("judged %q although nothing was saved", r.JudgedBy())
	}
}

// A line's known level keeps debug and info text from firing.
func TestLevel(t *testing.T) {
	fatal := "nvidia 0000:3b:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)"
	for _, tt := range []struct {
		level int
		want  check.Status
	}{{-1, check.Fail}, {0, check.Fail}, {3, check.Fail}, {4, check.Fail}, {5, check.OK}, {6, check.OK}, {7, check.OK}} {
		n := newNode(t)
		s := kmsg.Snapshot{BootID: "b", Lines: []kmsg.Line{{Level: tt.level, Text: fatal}}}
		if got := one(t, must(n.run(s))); got.Status != tt.want {
			t.Errorf("level %d: %+v, want %s", tt.level, got, tt.want)
		}
	}
}

func must(res []check.Result, _ *fakeReader) []check.Result { return res }

// Lines read again (the cursor waits for a rule a job run did not run,
// or one that timed out) are judged once: the WARN is not reported, nor
// counted, a second time, and a new line after them still is.
func TestLinesReadAgainJudgedOnce(t *testing.T) {
	n := newNode(t)
	snap := n.seqs.Number(replay("b", hung))
	for i, want := range []check.Status{check.Warn, check.OK} {
		r := &fakeReader{Snap: snap}
		got := one(t, New(n.cfg, n.paths, n.dir, r).Run(context.Background()))
		if got.Status != want {
			t.Errorf("read %d: %+v, want %v", i+1, got, want)
		}
	}
	more := snap
	more.Lines = append(slices.Clone(snap.Lines), n.seqs.Number(replay("b", hung)).Lines...)
	got := one(t, New(n.cfg, n.paths, n.dir, &fakeReader{Snap: more}).Run(context.Background()))
	if got.Status != check.Warn || !strings.HasSuffix(got.Message, "(2 this boot)") {
		t.Errorf("old line and a new one: %+v, want the new one counted alone", got)
	}
}

// A run with nothing new writes nothing: the record is replaced (a new
// file, by rename) only when it changed.
func TestQuietRunWritesNothing(t *testing.T) {
	n := newNode(t)
	n.run(replay("b", lockup))
	path := filepath.Join(n.dir.Path, "host-kernel.json")
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	n.run(replay("b"))
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Errorf("a run with no new line rewrote %s", path)
	}
	n.run(replay("b", hung))
	if changed, _ := os.Stat(path); os.SameFile(before, changed) {
		t.Errorf("a run with a new WARN did not save %s", path)
	}
}

// btrfs says "forced readonly" at KERN_INFO (btrfs_info): on a node, where
// the level is known, it must still fire. Found in review.
func TestBtrfsForcedReadonlyAtInfo(t *testing.T) {
	n := newNode(t)
	snap := replay("b", "BTRFS info (device nvme0n1p2): forced readonly")
	snap.Lines[0].Level = 6
	got := one(t, must(n.run(snap)))
	if got.Status != check.Fail || got.Component != "nvme0n1p2" {
		t.Errorf("%+v, want FAIL on nvme0n1p2", got)
	}
}
