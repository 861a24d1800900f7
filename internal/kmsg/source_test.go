package kmsg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeKmsg answers read(2) as /dev/kmsg does: one record per call, or an
// errno. After its script it answers EAGAIN (the end of the log).
type fakeKmsg struct {
	script []any // string (a record) or error
	reads  int
}

func (f *fakeKmsg) Read(p []byte) (int, error) {
	f.reads++
	if len(f.script) == 0 {
		return 0, unix.EAGAIN
	}
	step := f.script[0]
	f.script = f.script[1:]
	if err, ok := step.(error); ok {
		return 0, err
	}
	s := step.(string) + "\n"
	if len(s) > len(p) {
		return 0, unix.EINVAL
	}
	return copy(p, s), nil
}

func seqs(rs []Record) []uint64 {
	var out []uint64
	for _, r := range rs {
		out = append(out, r.Seq)
	}
	return out
}

func TestReadRecords(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		script   []any
		from     uint64
		want     []uint64
		seen     int
		newest   uint64
		complete bool
		err      bool
	}{
		{"whole log", []any{"6,0,1,-;a", "6,1,2,-;b", "4,2,3,-;c"}, 0, []uint64{0, 1, 2}, 3, 2, true, false},
		{"from the cursor", []any{"6,0,1,-;a", "6,1,2,-;b", "4,2,3,-;c"}, 2, []uint64{2}, 3, 2, true, false},
		{"nothing new", []any{"6,0,1,-;a", "6,1,2,-;b"}, 2, nil, 2, 1, true, false},
		// EPIPE: the records the reader was at were overwritten; the
		// kernel moved it to the oldest one left, and reading goes on.
		{"overwritten while reading", []any{"6,10,1,-;a", unix.EPIPE, "6,25,2,-;b", "6,26,3,-;c"}, 0, []uint64{10, 25, 26}, 3, 26, true, false},
		{"interrupted", []any{"6,1,1,-;a", unix.EINTR, "6,2,2,-;b"}, 0, []uint64{1, 2}, 2, 2, true, false},
		{"garbage record skipped", []any{"6,1,1,-;a", "garbage", "6,2,2,-;b"}, 0, []uint64{1, 2}, 2, 2, true, false},
		{"EOF ends the log too", []any{"6,1,1,-;a"}, 0, []uint64{1}, 1, 1, true, false},
		{"EINVAL stops with what was read", []any{"6,1,1,-;a", unix.EINVAL, "6,2,2,-;b"}, 0, []uint64{1}, 1, 1, false, true},
		{"EIO stops", []any{unix.EIO}, 0, nil, 0, 0, false, true},
		{"empty log", nil, 0, nil, 0, 0, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := readRecords(ctx, &fakeKmsg{script: tc.script}, "/dev/kmsg", tc.from)
			if (err != nil) != tc.err || fmt.Sprint(seqs(b.Records)) != fmt.Sprint(tc.want) ||
				b.Seen != tc.seen || b.Newest != tc.newest || b.Complete != tc.complete {
				t.Errorf("got %v seen %d newest %d complete %v err %v; want %v seen %d newest %d complete %v err %v",
					seqs(b.Records), b.Seen, b.Newest, b.Complete, err, tc.want, tc.seen, tc.newest, tc.complete, tc.err)
			}
		})
	}
}

// endless is a log that never ends: a flood.
type endless struct{ seq int }

func (e *endless) Read(p []byte) (int, error) {
	e.seq++
	return copy(p, fmt.Sprintf("6,%d,%d,-;flood\n", e.seq, e.seq)), nil
}

func TestReadRecordsCapped(t *testing.T) {
	b, err := readRecords(context.Background(), &endless{}, "/dev/kmsg", 0)
	if err != nil || b.Complete || len(b.Records) != maxKept {
		t.Fatalf("flood: %d records, complete %v, %v; want %d, incomplete", len(b.Records), b.Complete, err, maxKept)
	}
	// Everything before the cursor is only counted, up to maxReads.
	b, err = readRecords(context.Background(), &endless{}, "/dev/kmsg", 1<<62)
	if err != nil || b.Complete || len(b.Records) != 0 || b.Seen != maxReads {
		t.Fatalf("flood before cursor: %d records, seen %d, complete %v, %v", len(b.Records), b.Seen, b.Complete, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b, _ = readRecords(ctx, &endless{}, "/dev/kmsg", 0)
	if b.Complete || len(b.Records) != 0 {
		t.Fatalf("after the deadline: %d records, complete %v", len(b.Records), b.Complete)
	}
}

func TestKmsgSourceMissing(t *testing.T) {
	root := t.TempDir()
	src := KmsgSource(root, "/dev/kmsg")
	_, err := src.Records(context.Background(), 0)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing device: %v, want not-exist", err)
	}
	if src.BootID() != "" {
		t.Errorf("boot id %q without proc", src.BootID())
	}
	id := "5e1a7ed0-1111-4000-8000-00000000abcd"
	mustWrite(t, filepath.Join(root, "proc/sys/kernel/random/boot_id"), id+"\n")
	if got := src.BootID(); got != "" {
		t.Errorf("one source read the boot id twice: %q", got) // a run has one answer
	}
	if got := KmsgSource(root, "/dev/kmsg").BootID(); got != id {
		t.Errorf("boot id %q, want %q", got, id)
	}
}

// A FIFO with no writer behaves like a device that never answers: opened
// non-blocking it reads as empty rather than hang the check.
func TestKmsgSourceFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kmsg")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	b, err := KmsgSource("", p).Records(ctx, 0)
	if err != nil || len(b.Records) != 0 || ctx.Err() != nil {
		t.Fatalf("fifo: %+v, %v (ctx %v)", b, err, ctx.Err())
	}
}

// The real device, where this machine has one and lets us read it: the
// whole ring comes back, without blocking, well within a second.
func TestKmsgSourceReal(t *testing.T) {
	if _, err := os.Stat("/dev/kmsg"); err != nil {
		t.Skip(err)
	}
	if fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK, 0); err != nil {
		t.Skipf("/dev/kmsg not readable here: %v", err)
	} else {
		unix.Close(fd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	src := KmsgSource("/", "/dev/kmsg")
	b, err := src.Records(ctx, 0)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("read /dev/kmsg: %v", err)
	}
	if !b.Complete || b.Seen == 0 || took > time.Second {
		t.Fatalf("read %d records in %v, complete %v", b.Seen, took, b.Complete)
	}
	for i := 1; i < len(b.Records); i++ {
		if b.Records[i].Seq <= b.Records[i-1].Seq {
			t.Fatalf("sequence goes back: %d after %d", b.Records[i].Seq, b.Records[i-1].Seq)
		}
	}
	// From past the newest record: nothing, still without blocking.
	b2, err := src.Records(ctx, b.Newest+1<<20)
	if err != nil || len(b2.Records) != 0 {
		t.Fatalf("past the end: %d records, %v", len(b2.Records), err)
	}
	lines, _ := Lines(b.Records)
	t.Logf("read %d records (newest %d) in %v, boot %s; %d kernel lines", b.Seen, b.Newest, took, src.BootID(), len(lines))
}

func TestSplitRecords(t *testing.T) {
	got := SplitRecords("6,1,1,-;a\n SUBSYSTEM=pci\n DEVICE=+pci:0000:18:00.0\n\n6,2,2,-;b\n6,3,3,-;c")
	want := []string{"6,1,1,-;a\n SUBSYSTEM=pci\n DEVICE=+pci:0000:18:00.0\n", "6,2,2,-;b\n", "6,3,3,-;c"}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("SplitRecords = %q, want %q", got, want)
	}
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
