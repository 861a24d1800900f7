package kmsg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuhc/gpuhc/internal/bootid"
)

// Source is the kernel log: /dev/kmsg on a node, a slice of records in
// the tests and under --simulate.
type Source interface {
	// Records returns the log's records with sequence numbers >= from,
	// oldest first. It never blocks: it returns what it has when ctx ends.
	Records(ctx context.Context, from uint64) (Batch, error)
	// BootID is the kernel's boot id ("" when unknown): sequence numbers
	// restart at every boot, so a cursor is only valid for its boot.
	BootID() string
}

// Batch is what one read of the kernel log found.
type Batch struct {
	Records []Record // seq >= from, oldest first
	// Seen counts every record read, those before from included, and
	// Newest is the highest sequence number among them: a log whose
	// newest record is older than the cursor has restarted (a reboot whose
	// boot id could not be read).
	Seen   int
	Newest uint64
	// Complete is false when reading stopped early (the deadline or the
	// per-run cap); Records are then the oldest ones, and the next run
	// goes on from the last of them.
	Complete bool
}

// Caps per run, so that a flood of kernel messages costs a bounded time.
// /dev/kmsg holds at most log_buf_len bytes (32 MiB at the very most,
// a few hundred thousand records), read one record per read(2).
const (
	maxReads = 1 << 20
	maxKept  = 100_000
	// recordBuf is larger than any record: the kernel's limit for one
	// /dev/kmsg record with its dictionary is 8 KiB (CONSOLE_EXT_LOG_MAX),
	// and read(2) fails with EINVAL on a smaller buffer.
	recordBuf = 16 << 10
	// maxFile caps a captured dump read as a regular file.
	maxFile = 64 << 20
)

type kmsgSource struct {
	path string
	boot *bootid.Once
}

// KmsgSource reads the kernel log device at path (checks.gpu.xid.kmsg,
// "/dev/kmsg") under root, and the boot id from
// <root>/proc/sys/kernel/random/boot_id. A regular file at path is read
// as a dump of /dev/kmsg (`cat /dev/kmsg > file`), for fixtures.
//
// boot, when given, is the run's one read of the boot id; otherwise it is
// read under root.
func KmsgSource(root, path string, boot ...*bootid.Once) Source {
	if root != "" && root != "/" {
		path = filepath.Join(root, path)
	}
	k := &kmsgSource{path: path, boot: bootid.New(root)}
	if len(boot) > 0 && boot[0] != nil {
		k.boot = boot[0]
	}
	return k
}

func (k *kmsgSource) BootID() string { return k.boot.ID() }

// Records reads in a goroutine: a read of a character device under
// O_NONBLOCK returns at once, but open(2) on a hung filesystem (a test
// root on NFS, say) need not, and a check must not outlive its deadline.
func (k *kmsgSource) Records(ctx context.Context, from uint64) (Batch, error) {
	type answer struct {
		b   Batch
		err error
	}
	ch := make(chan answer, 1)
	start := time.Now()
	go func() {
		b, err := k.read(ctx, from)
		ch <- answer{b, err}
	}()
	select {
	case a := <-ch:
		return a.b, a.err
	case <-ctx.Done():
	}
	// The read loop stops at the deadline too, with what it has: give it
	// a moment to hand that over before calling the device hung.
	select {
	case a := <-ch:
		return a.b, a.err
	case <-time.After(handOver):
		return Batch{}, fmt.Errorf("%s did not answer in %gs", k.path, time.Since(start).Round(100*time.Millisecond).Seconds())
	}
}

// handOver is how long Records waits, after the deadline, for a read loop
// that is still running normally.
const handOver = 10 * time.Millisecond

func (k *kmsgSource) read(ctx context.Context, from uint64) (Batch, error) {
	// Not os.Open: Go registers a character device with its poller and
	// then waits on EAGAIN, which on /dev/kmsg means waiting for the next
	// kernel message. A raw non-blocking fd returns EAGAIN at the end of
	// the log instead.
	fd, err := unix.Open(k.path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return Batch{}, &os.PathError{Op: "open", Path: k.path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Batch{}, &os.PathError{Op: "stat", Path: k.path, Err: err}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		return readDump(ctx, fd, k.path, from, st.Size)
	}
	return readRecords(ctx, rawFD(fd), k.path, from)
}

// rawFD reads with read(2) and reports errno as is (EAGAIN, EPIPE).
type rawFD int

func (fd rawFD) Read(p []byte) (int, error) {
	n, err := unix.Read(int(fd), p)
	switch {
	case err != nil:
		return 0, err
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}

// readRecords reads /dev/kmsg: one record per read(2), EAGAIN at the end
// of the log, EPIPE when the reader's next record was overwritten by new
// ones (the kernel then moves the reader to the oldest record it still
// has, so reading simply goes on: the lost records are gone for everyone).
func readRecords(ctx context.Context, r io.Reader, path string, from uint64) (Batch, error) {
	b := Batch{}
	buf := make([]byte, recordBuf)
	for reads := 0; ; reads++ {
		if reads >= maxReads || len(b.Records) >= maxKept || ctx.Err() != nil {
			return b, nil
		}
		n, err := r.Read(buf)
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EPIPE):
			continue
		case errors.Is(err, unix.EAGAIN), err == io.EOF, err == nil && n == 0:
			b.Complete = true
			return b, nil
		case err != nil:
			// EINVAL: a record larger than the buffer, which the kernel
			// never writes; anything else is as unexpected. The reader
			// stays on the record, so stop rather than spin.
			return b, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if seq, ok := headSeq(buf[:n]); ok && seq < from {
			// Before the cursor (most of the ring, on most runs): counted,
			// not kept, so not copied nor parsed further.
			b.count(seq)
			continue
		}
		b.add(string(buf[:n]), from)
	}
}

// headSeq is a record's sequence number, read from its header in place.
func headSeq(p []byte) (uint64, bool) {
	i := 0
	for i < len(p) && p[i] != ',' {
		if p[i] < '0' || p[i] > '9' {
			return 0, false
		}
		i++
	}
	if i == 0 || i == len(p) {
		return 0, false
	}
	var seq uint64
	j := i + 1
	for ; j < len(p) && p[j] != ','; j++ {
		c := p[j]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if seq > (math.MaxUint64-d)/10 {
			return 0, false
		}
		seq = seq*10 + d
	}
	if j == i+1 || j == len(p) || !bytes.ContainsRune(p[j:], ';') {
		return 0, false
	}
	return seq, true
}

// readDump reads a captured /dev/kmsg dump (a regular file).
func readDump(ctx context.Context, fd int, path string, from uint64, size int64) (Batch, error) {
	var buf bytes.Buffer
	buf.Grow(int(min(max(size, 0), maxFile)) + bytes.MinRead) // one read, for a file that does not grow meanwhile
	if _, err := buf.ReadFrom(io.LimitReader(rawFD(fd), maxFile)); err != nil {
		return Batch{}, fmt.Errorf("read %s: %w", path, err)
	}
	data := buf.Bytes()
	recs := SplitRecords(string(data))
	// Room for the records to keep, and only those: most of a ring is
	// before the cursor, and a run that finds nothing new should not pay
	// for a megabyte of Records.
	keep := 0
	for _, s := range recs {
		if seq, ok := headSeq([]byte(s[:min(len(s), 64)])); !ok || seq >= from {
			keep++
		}
	}
	b := Batch{Complete: true, Records: make([]Record, 0, min(keep, maxKept))}
	for _, s := range recs {
		if ctx.Err() != nil || len(b.Records) >= maxKept {
			b.Complete = false
			break
		}
		if seq, ok := headSeq([]byte(s[:min(len(s), 64)])); ok && seq < from {
			b.count(seq)
			continue
		}
		b.add(s, from)
	}
	return b, nil
}

// count counts a record read.
func (b *Batch) count(seq uint64) {
	if b.Seen == 0 || seq > b.Newest {
		b.Newest = seq
	}
	b.Seen++
}

// add takes one record, counting it whatever its sequence number.
// Unparsable records are skipped: a kernel log is never a reason to fail.
func (b *Batch) add(s string, from uint64) {
	r, err := ParseRecord(s)
	if err != nil {
		return
	}
	b.keep(r, from)
}

// keep takes one parsed record, counting it whatever its sequence number.
func (b *Batch) keep(r Record, from uint64) {
	b.count(r.Seq)
	if r.Seq >= from {
		b.Records = append(b.Records, r)
	}
}

type sliceSource struct {
	records []string
	parsed  []Record // a replay's, read from text (Replay)
	bootID  string
}

// SliceSource serves records given as /dev/kmsg strings
// ("3,1042,5123456,-;NVRM: Xid (PCI:0000:4e:00): 79, ..."), such as a
// simulated machine's Kmsg, under bootID. Like /dev/kmsg, it holds the
// boot's log whether or not gpuhc watched it: with no state record the
// check starts at its end (see SimulatedSource for a fire drill).
func SliceSource(records []string, bootID string) Source {
	return &sliceSource{records: records, bootID: bootID}
}

func (s *sliceSource) BootID() string { return s.bootID }

func (s *sliceSource) Records(ctx context.Context, from uint64) (Batch, error) {
	b := Batch{Complete: true}
	for _, r := range s.records {
		if ctx.Err() != nil || len(b.Records) >= maxKept {
			b.Complete = false
			break
		}
		b.add(r, from)
	}
	for _, r := range s.parsed {
		if ctx.Err() != nil || len(b.Records) >= maxKept {
			b.Complete = false
			break
		}
		b.keep(r, from)
	}
	return b, nil
}

// watchedSource is a log gpuhc is taken to have been watching from a
// given record on: with no state record, the cursor starts there instead
// of at the end of the log.
type watchedSource interface {
	watchedFrom() uint64
}

type simulatedSource struct {
	sliceSource
	from uint64
}

// SimulatedSource is SliceSource for a simulated node on which gpuhc is
// taken to have run since boot: the records before seq from (the boot's
// messages) were read by runs the simulation stands for, and those from
// it on (the injected XIDs) are new. Without it a fire drill's first run,
// whose state directory has no cursor yet, would start at the end of the
// log and never see the XIDs injected into it. With a cursor recorded,
// it is SliceSource.
func SimulatedSource(records []string, bootID string, from uint64) Source {
	return &simulatedSource{sliceSource{records: records, bootID: bootID}, from}
}

func (s *simulatedSource) watchedFrom() uint64 { return s.from }
