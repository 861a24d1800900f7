package kmsg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/statefile"
)

const bootA = "5e1a7ed0-0000-4000-8000-0000000000aa"

// logOf is n kernel records "line 0" … "line n-1".
func logOf(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("6,%d,%d,-;line %d", i, i*10, i))
	}
	return out
}

// pass is one run: a Log over src, rule "r" registered, its snapshot
// judged and committed.
func pass(t *testing.T, src Source, dir statefile.Dir) Snapshot {
	t.Helper()
	l := NewLog(src, dir)
	l.Register("r")
	snap := l.Snapshot(context.Background())
	l.Judged("r")
	if _, err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	return snap
}

func texts(ls []Line) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Text)
	}
	return out
}

func savedCursor(t *testing.T, dir statefile.Dir) cursor {
	t.Helper()
	var c cursor
	if err := dir.Load(CursorFile, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// The cursor across runs: a first run starts at the end of the log (the
// lines there are from before gpuhc watched), then each line is in
// exactly one run's snapshot; a new boot reads its log from the start.
func TestLogCursor(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	snap := pass(t, SliceSource(logOf(3), bootA), dir)
	if !snap.Fresh || len(snap.Lines) != 0 || snap.Err != nil || snap.BootID != bootA {
		t.Fatalf("first run: %+v", snap)
	}
	if c := savedCursor(t, dir); c != (cursor{bootA, 3}) {
		t.Fatalf("cursor %+v", c)
	}
	if snap := pass(t, SliceSource(logOf(3), bootA), dir); snap.Fresh || len(snap.Lines) != 0 {
		t.Fatalf("nothing new: %+v", snap)
	}
	if snap := pass(t, SliceSource(logOf(5), bootA), dir); fmt.Sprint(texts(snap.Lines)) != "[line 3 line 4]" {
		t.Fatalf("new lines: %+v", snap)
	}
	// A reboot: another boot id, the whole log.
	if snap := pass(t, SliceSource(logOf(2), "boot-b"), dir); snap.Fresh || snap.Restarted || fmt.Sprint(texts(snap.Lines)) != "[line 0 line 1]" {
		t.Fatalf("new boot: %+v", snap)
	}
	if c := savedCursor(t, dir); c != (cursor{"boot-b", 2}) {
		t.Fatalf("cursor %+v", c)
	}
}

// Without a boot id, a log below the cursor is a reboot: read from its
// start, and said so (the rules drop their boot's state).
func TestLogRestartedWithoutBootID(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	if err := dir.Save(CursorFile, cursor{"", 100}); err != nil {
		t.Fatal(err)
	}
	snap := pass(t, SliceSource(logOf(2), ""), dir)
	if !snap.Restarted || fmt.Sprint(texts(snap.Lines)) != "[line 0 line 1]" {
		t.Fatalf("restarted: %+v", snap)
	}
	if c := savedCursor(t, dir); c.Next != 2 {
		t.Errorf("cursor %+v", c)
	}
}

// The cursor moves only once every registered rule has judged the lines:
// a rule that timed out sees them again next run.
func TestLogCommitWaitsForEveryRule(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	if err := dir.Save(CursorFile, cursor{bootA, 1}); err != nil {
		t.Fatal(err)
	}
	l := NewLog(SliceSource(logOf(4), bootA), dir)
	l.Register("gpu.xid")
	l.Register("host.kernel")
	l.Register("gpu.xid")
	if got := fmt.Sprint(l.Rules()); got != "[gpu.xid host.kernel]" {
		t.Errorf("rules %s", got)
	}
	if p := l.Pending(); p != nil {
		t.Errorf("pending before any snapshot: %v", p)
	}
	l.Snapshot(context.Background())
	l.Judged("gpu.xid")
	if saved, err := l.Commit(); saved || err != nil {
		t.Fatalf("committed with host.kernel pending: %v %v", saved, err)
	}
	if got := fmt.Sprint(l.Pending()); got != "[host.kernel]" {
		t.Errorf("pending %s", got)
	}
	if c := savedCursor(t, dir); c.Next != 1 {
		t.Fatalf("cursor moved to %d", c.Next)
	}
	l.Judged("host.kernel")
	if saved, err := l.Commit(); !saved || err != nil {
		t.Fatalf("commit: %v %v", saved, err)
	}
	if c := savedCursor(t, dir); c.Next != 4 {
		t.Fatalf("cursor %d, want 4", c.Next)
	}
	// No snapshot read (no kernel-log rule ran): nothing to save.
	l = NewLog(SliceSource(logOf(6), bootA), dir)
	if saved, _ := l.Commit(); saved {
		t.Error("committed without a snapshot")
	}
}

// Every rule of a run gets the same snapshot, read once, however many
// ask at the same time.
func TestLogOneRead(t *testing.T) {
	src := &countingSource{Source: SliceSource(logOf(3), bootA)}
	dir := statefile.Dir{Path: t.TempDir()}
	if err := dir.Save(CursorFile, cursor{bootA, 0}); err != nil {
		t.Fatal(err)
	}
	l := NewLog(src, dir)
	var wg sync.WaitGroup
	snaps := make([]Snapshot, 8)
	for i := range snaps {
		wg.Go(func() { snaps[i] = l.Snapshot(context.Background()) })
	}
	wg.Wait()
	for i, s := range snaps {
		if fmt.Sprint(texts(s.Lines)) != "[line 0 line 1 line 2]" {
			t.Errorf("snapshot %d: %+v", i, s)
		}
	}
	if src.n != 1 {
		t.Errorf("%d reads, want 1", src.n)
	}
}

type countingSource struct {
	Source
	mu sync.Mutex
	n  int
}

func (c *countingSource) Records(ctx context.Context, from uint64) (Batch, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.Source.Records(ctx, from)
}

// An upgrade from a gpuhc whose cursor was in gpu-xid.json: the pass
// goes on from it, and writes its own file at once; a gpu-xid.json
// without a cursor (written since by gpu.xid) is no cursor.
func TestLogMigratesTheXIDCursor(t *testing.T) {
	for _, tc := range []struct {
		name, legacy string
		fresh        bool
		want         string
	}{
		{"same boot", `{"boot_id":"` + bootA + `","next_seq":2,"gpus":{}}`, false, "[line 2 line 3]"},
		{"another boot", `{"boot_id":"old","next_seq":2}`, false, "[line 0 line 1 line 2 line 3]"},
		{"no next_seq", `{"boot_id":"` + bootA + `","gpus":{}}`, true, "[]"},
		{"corrupt", `{`, true, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := t.TempDir()
			if err := os.WriteFile(filepath.Join(path, legacyFile), []byte(tc.legacy), 0o600); err != nil {
				t.Fatal(err)
			}
			dir := statefile.Dir{Path: path}
			l := NewLog(SliceSource(logOf(4), bootA), dir)
			snap := l.Snapshot(context.Background())
			if snap.Fresh != tc.fresh || fmt.Sprint(texts(snap.Lines)) != tc.want {
				t.Fatalf("snapshot %+v", snap)
			}
			var c cursor
			err := dir.Load(CursorFile, &c)
			if !tc.fresh && (err != nil || c.BootID != bootA) {
				t.Errorf("cursor not taken over at once: %+v %v", c, err)
			}
		})
	}
}

// A read-only state directory (a dry run) is never written: not by the
// migration, not by Commit.
func TestLogReadOnly(t *testing.T) {
	path := t.TempDir()
	if err := os.WriteFile(filepath.Join(path, legacyFile), []byte(`{"boot_id":"`+bootA+`","next_seq":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := statefile.Dir{Path: path, ReadOnly: true}
	for range 2 {
		if snap := pass(t, SliceSource(logOf(3), bootA), dir); fmt.Sprint(texts(snap.Lines)) != "[line 1 line 2]" {
			t.Fatalf("dry run: %+v", snap)
		}
	}
	if _, err := os.Stat(filepath.Join(path, CursorFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dry run wrote the cursor: %v", err)
	}
}

// An unfinished XID/SXid line at the end holds the cursor on it.
func TestLogHold(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	if err := dir.Save(CursorFile, cursor{bootA, 0}); err != nil {
		t.Fatal(err)
	}
	recs := append(logOf(2), "4,2,30,-;nvidia-nvswitch0: SXid (PCI:0000:05:00.0): ")
	if snap := pass(t, SliceSource(recs, bootA), dir); fmt.Sprint(texts(snap.Lines)) != "[line 0 line 1]" {
		t.Fatalf("held: %+v", snap)
	}
	if c := savedCursor(t, dir); c.Next != 2 {
		t.Fatalf("cursor %d, want held on 2", c.Next)
	}
	recs = append(recs, "4,3,40,c;22013, Fatal, Link 10 minion ...")
	snap := pass(t, SliceSource(recs, bootA), dir)
	if fmt.Sprint(texts(snap.Lines)) != "[nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 22013, Fatal, Link 10 minion ...]" {
		t.Fatalf("whole: %+v", snap)
	}
}

// A log that cannot be read: Err, and the cursor stays; a first run that
// cannot read to the end does not start it.
func TestLogUnreadable(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	snap := pass(t, KmsgSource(t.TempDir(), "/dev/kmsg"), dir)
	if !errors.Is(snap.Err, os.ErrNotExist) {
		t.Fatalf("missing device: %+v", snap)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l := NewLog(SliceSource(logOf(3), bootA), dir)
	l.Register("r")
	snap = l.Snapshot(ctx)
	l.Judged("r")
	if snap.Err == nil || snap.Err.Error() != "it could not be read to its end in time; the cursor starts on the next run" {
		t.Fatalf("incomplete first read: %+v", snap)
	}
	if saved, _ := l.Commit(); saved {
		t.Error("cursor saved after an incomplete first read")
	}
	var none *Log
	if snap := none.Snapshot(context.Background()); snap.Err == nil {
		t.Error("a nil Log read something")
	}
	none.Register("r")
	none.Judged("r")
	if saved, err := none.Commit(); saved || err != nil {
		t.Error("a nil Log committed")
	}
}

// A cursor file that cannot be read (not corrupt: an I/O error) reads the
// log from its start and says so.
func TestLogCursorUnreadable(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l := NewLog(SliceSource(logOf(2), bootA), statefile.Dir{Path: notDir})
	snap := l.Snapshot(context.Background())
	if snap.Trouble == "" || fmt.Sprint(texts(snap.Lines)) != "[line 0 line 1]" {
		t.Fatalf("%+v", snap)
	}
	l.Register("r")
	l.Judged("r")
	if _, err := l.Commit(); err == nil {
		t.Error("no error saving into a file")
	}
}

// A run with nothing new leaves the cursor file as it is: no write, no
// fsync.
func TestLogCommitNothingNewWritesNothing(t *testing.T) {
	path := t.TempDir()
	dir := statefile.Dir{Path: path}
	marked := `{"boot_id":"` + bootA + `","next_seq":3,"mark":1}`
	if err := os.WriteFile(filepath.Join(path, CursorFile), []byte(marked), 0o600); err != nil {
		t.Fatal(err)
	}
	pass(t, SliceSource(logOf(3), bootA), dir)
	if b, _ := os.ReadFile(filepath.Join(path, CursorFile)); string(b) != marked {
		t.Errorf("rewritten: %s", b)
	}
	pass(t, SliceSource(logOf(4), bootA), dir)
	if c := savedCursor(t, dir); c.Next != 4 {
		t.Errorf("cursor %d, want 4", c.Next)
	}
}

// blockingSource answers Records only once released.
type blockingSource struct {
	Source
	release chan struct{}
}

func (b *blockingSource) Records(ctx context.Context, from uint64) (Batch, error) {
	<-b.release
	return b.Source.Records(ctx, from)
}

// A rule that asks while another's read is still running waits for it
// only as long as its own time allows, then reports the log unreadable;
// later callers get the snapshot.
func TestLogWaitBoundedByCaller(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	if err := dir.Save(CursorFile, cursor{bootA, 0}); err != nil {
		t.Fatal(err)
	}
	src := &blockingSource{Source: SliceSource(logOf(2), bootA), release: make(chan struct{})}
	l := NewLog(src, dir)
	first := make(chan Snapshot)
	go func() { first <- l.Snapshot(context.Background()) }()
	for {
		l.mu.Lock()
		started := l.done != nil
		l.mu.Unlock()
		if started {
			break
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if snap := l.Snapshot(ctx); snap.Err == nil || !errors.Is(snap.Err, context.DeadlineExceeded) {
		t.Errorf("waiting caller: %+v", snap)
	}
	close(src.release)
	if snap := <-first; fmt.Sprint(texts(snap.Lines)) != "[line 0 line 1]" {
		t.Errorf("first caller: %+v", snap)
	}
	if snap := l.Snapshot(context.Background()); len(snap.Lines) != 2 {
		t.Errorf("later caller: %+v", snap)
	}
}
