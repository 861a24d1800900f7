package kmsg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/gpuhc/gpuhc/internal/statefile"
)

// CursorFile is the pass's record in the state directory.
const CursorFile = "kmsg-cursor.json"

// legacyFile is gpu.xid's record, which held the cursor before the pass
// had its own: an upgrade takes the cursor from it once (see load).
const legacyFile = "gpu-xid.json"

// cursor is where the next run reads from: {boot id, next sequence
// number}. Within a boot only records at or after Next are new, so each
// line is judged by exactly one run (a dry run saves nothing, so it shows
// the same lines again next time).
//
// Where the cursor starts:
//   - No record (gpuhc's first run on the node, or the file was deleted)
//     or a corrupt one: at the end of the log. The lines already in the
//     kernel's buffer are from earlier in this boot, before gpuhc watched
//     or before the record was deleted; acting on them would drain every
//     node of a fleet that ever had, say, an XID 74 this boot, GPU reset
//     since or not. The rules report OK with Started.
//   - A record of another boot (the boot id changed: a reboot): at the
//     start of the log. Sequence numbers restart at 0 every boot, the old
//     cursor means nothing, and every record in the log is from the new
//     boot, which gpuhc has watched since it started.
//   - No boot id can be read: the cursor is kept, and a log whose newest
//     record is older than it is taken for a reboot (Snapshot.Restarted).
//   - A record that cannot be read at all (an I/O error, not corruption):
//     at the start of the log, with Snapshot.Trouble saying so.
type cursor struct {
	BootID string `json:"boot_id"`
	Next   uint64 `json:"next_seq"`
}

// legacy is the cursor part of gpu-xid.json as releases before the pass
// wrote it. Next is a pointer: a gpu-xid.json written since (which has
// no next_seq) must not read as "from the start of this boot", which
// would judge the whole log again.
type legacy struct {
	BootID string  `json:"boot_id"`
	Next   *uint64 `json:"next_seq"`
}

// Log is the kernel-log pass of one run: a Reader over a Source, with
// its cursor in a state directory. Build one per run (NewLog), register
// every rule that will judge it, run the checks, then Commit.
//
// The contract, for rules and programs:
//   - Register(name) is called for every kernel-log rule the run builds,
//     before the checks run (the catalog does it when it builds the rule).
//   - A rule calls Snapshot when it runs; the first call reads the log
//     (bounded by that caller's context), every later call gets the same
//     Snapshot.
//   - A rule calls Judged(name) once it has judged the lines and saved its
//     own state.
//   - The program calls Commit after the checks: the cursor moves past the
//     snapshot only if every registered rule said Judged. A rule that
//     timed out, or was not run (a prolog that runs gpu.xid but not
//     host.kernel), leaves the cursor where it was: the lines are read
//     again next run. Losing lines would be a missed drain. The rules that
//     did judge them keep the mark of what they judged in their own state
//     (Snapshot.Unjudged, Mark), so each line is still judged once.
//
// A read-only state directory (a dry run) is read but never written.
// The zero of *Log (nil) is a log that cannot be read: every rule reports
// ERROR.
type Log struct {
	src Source
	dir statefile.Dir

	mu     sync.Mutex
	done   chan struct{} // closed once snap is read
	snap   Snapshot
	next   *cursor // what Commit saves; nil: nothing
	onDisk *cursor // what CursorFile holds, when it could be read
	rules  []string
	judged map[string]bool
}

// NewLog is the pass over src with its cursor in dir.
func NewLog(src Source, dir statefile.Dir) *Log {
	return &Log{src: src, dir: dir, judged: map[string]bool{}}
}

// Source is the log the pass reads (the prolog records its position).
func (l *Log) Source() Source {
	if l == nil {
		return nil
	}
	return l.src
}

// Register names a rule that will judge this run's snapshot; Commit waits
// for its Judged. Registering twice is registering once.
func (l *Log) Register(rule string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !slices.Contains(l.rules, rule) {
		l.rules = append(l.rules, rule)
	}
}

// Rules are the registered rules, in the order registered.
func (l *Log) Rules() []string {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.rules)
}

// Judged records that rule has judged the snapshot and saved its state.
func (l *Log) Judged(rule string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.judged[rule] = true
}

var errNoLog = errors.New("no kernel log source")

// Snapshot reads the log since the cursor, once per run.
func (l *Log) Snapshot(ctx context.Context) Snapshot {
	if l == nil || l.src == nil {
		return Snapshot{Err: errNoLog}
	}
	l.mu.Lock()
	if l.done != nil {
		done := l.done
		l.mu.Unlock()
		select {
		case <-done:
			return l.snap
		case <-ctx.Done():
			return Snapshot{BootID: l.src.BootID(), Err: fmt.Errorf("it was still being read when this check's time ran out: %w", ctx.Err())}
		}
	}
	l.done = make(chan struct{})
	l.mu.Unlock()
	snap, next, onDisk := l.read(ctx)
	l.mu.Lock()
	l.snap, l.next, l.onDisk = snap, next, onDisk
	l.mu.Unlock()
	close(l.done)
	return snap
}

// Commit saves the cursor past the snapshot if every registered rule
// judged it; it does nothing when no snapshot was read, some rule did not
// judge it, or the state directory is read-only. saved says whether the
// cursor moved.
func (l *Log) Commit() (saved bool, err error) {
	if l == nil {
		return false, nil
	}
	l.mu.Lock()
	next, onDisk := l.next, l.onDisk
	for _, r := range l.rules {
		if !l.judged[r] {
			next = nil
		}
	}
	l.mu.Unlock()
	if next == nil || l.dir.ReadOnly {
		return false, nil
	}
	if onDisk != nil && *onDisk == *next {
		// Nothing new: no write, no fsync (the steady state of most runs).
		return true, nil
	}
	if err := l.dir.Save(CursorFile, next); err != nil {
		return false, fmt.Errorf("save the kernel log cursor: %w", err)
	}
	return true, nil
}

// Pending are the registered rules that have not said Judged, when a
// snapshot was read: those that keep the cursor where it was.
func (l *Log) Pending() []string {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next == nil {
		return nil
	}
	var out []string
	for _, r := range l.rules {
		if !l.judged[r] {
			out = append(out, r)
		}
	}
	return out
}

// read is the pass itself: the snapshot, the cursor to save after it (nil
// when the log could not be read), and the one the state directory holds.
func (l *Log) read(ctx context.Context) (Snapshot, *cursor, *cursor) {
	boot := l.src.BootID()
	snap := Snapshot{BootID: boot}
	cur, onDisk, fresh, err := l.load(boot)
	if err != nil {
		snap.Trouble = fmt.Sprintf("cannot read the kernel log cursor, reading the kernel log from the start: %v", err)
	}
	if w, ok := l.src.(watchedSource); ok && fresh {
		cur.Next, fresh = w.watchedFrom(), false
	}
	from := cur.Next
	if fresh {
		from = math.MaxUint64 // only find the end
	}
	batch, err := l.src.Records(ctx, from)
	if err == nil && !fresh && cur.restarted(batch) {
		snap.Restarted = true
		cur.Next = 0
		batch, err = l.src.Records(ctx, 0)
	}
	if err == nil && fresh && !batch.Complete {
		// The next run would take records before the true end for new.
		err = errors.New("it could not be read to its end in time; the cursor starts on the next run")
	}
	if err != nil {
		snap.Err = err
		return snap, nil, onDisk
	}
	if fresh {
		if batch.Seen > 0 {
			cur.Next = batch.Newest + 1
		}
		snap.Fresh = true
		return snap, cur, onDisk
	}
	var hold *uint64
	snap.Lines, hold = Lines(batch.Records)
	cur.advance(batch, hold)
	return snap, cur, onDisk
}

// load reads the saved cursor for boot. fresh is true when there is none
// to go on from: no record (a first run, or the file was deleted) or a
// corrupt one. A record of another boot starts the new boot's log from
// its beginning; one that cannot be read at all is an error to report,
// and the log is read from its beginning too.
//
// With no record of its own the cursor of an older gpuhc is taken from
// gpu-xid.json, once: the first Commit writes kmsg-cursor.json, so an
// upgrade neither loses the XIDs logged since the last run nor judges the
// ones before it again.
func (l *Log) load(boot string) (cur, onDisk *cursor, fresh bool, err error) {
	var raw json.RawMessage
	err = l.dir.Load(CursorFile, &raw)
	if err != nil && !errors.Is(err, statefile.ErrCorrupt) {
		return &cursor{BootID: boot}, nil, false, err
	}
	if err == nil && raw == nil {
		cur, onDisk, fresh = l.migrate(boot)
		return cur, onDisk, fresh, nil
	}
	var saved cursor
	if err != nil || json.Unmarshal(raw, &saved) != nil {
		return &cursor{BootID: boot}, nil, true, nil
	}
	disk := saved
	if saved.BootID != boot {
		return &cursor{BootID: boot}, &disk, false, nil
	}
	return &saved, &disk, false, nil
}

// migrate takes the cursor from gpu-xid.json; anything short of a whole
// cursor there (no file, no next_seq, unreadable) is a fresh start.
func (l *Log) migrate(boot string) (cur, onDisk *cursor, fresh bool) {
	var raw json.RawMessage
	if err := l.dir.Load(legacyFile, &raw); err != nil || raw == nil {
		return &cursor{BootID: boot}, nil, true
	}
	var old legacy
	if json.Unmarshal(raw, &old) != nil || old.Next == nil {
		return &cursor{BootID: boot}, nil, true
	}
	cur = &cursor{BootID: boot}
	if old.BootID == boot {
		cur.Next = *old.Next
	}
	// At once, not at Commit: gpu.xid rewrites gpu-xid.json without the
	// cursor during this run, and a run whose Commit does not happen must
	// not leave the next one without a cursor (it would start at the end
	// of the log and lose what came since). A failure here is Commit's to
	// report: it writes the same file.
	if !l.dir.ReadOnly && l.dir.Save(CursorFile, cur) == nil {
		disk := *cur
		onDisk = &disk
	}
	return cur, onDisk, false
}

// advance moves the cursor past what was read, except to an XID/SXid line
// the driver was still writing (hold), which the next run reads again
// whole.
func (c *cursor) advance(b Batch, hold *uint64) {
	switch {
	case hold != nil:
		c.Next = *hold
	case len(b.Records) > 0:
		c.Next = b.Records[len(b.Records)-1].Seq + 1
	}
}

// restarted: the log's newest record is older than the cursor, which
// within one boot cannot happen. Without a boot id it means a reboot; with
// one, a log that was swapped under us (a fixture). Either way the cursor
// is wrong and the log is read again from the start.
func (c *cursor) restarted(b Batch) bool {
	if c.Next == 0 || !b.Complete {
		return false
	}
	return b.Seen == 0 || b.Newest+1 < c.Next
}
