// Package kmsg is the one kernel-log pass of a run: it reads the new
// /dev/kmsg records once (from a cursor kept in the state directory and
// keyed by boot id), rebuilds the kernel's lines from them, and hands the
// same lines to every rule that judges the kernel log (gpu.xid, the
// NVSwitch SXid rules, the host rules).
//
// Only kernel records (facility 0) become lines: userspace may write to
// /dev/kmsg, but only with facility 1 or more, so no program's write can
// ever drain a node.
package kmsg

import "context"

// Line is one kernel log line, rebuilt from one or more records.
type Line struct {
	Seq      uint64 // the record the line starts in
	TimeUsec uint64 // microseconds since boot; 0 when unknown (a text replay)
	// Level is the syslog level (PRI & 7: 0 emerg … 7 debug), or -1 when
	// the source does not say (a plain dmesg or syslog text replay).
	Level int
	Text  string // the message, without prefix, timestamp or newline
}

// Snapshot is one run's read of the kernel log: the lines since the
// cursor, the same for every rule.
type Snapshot struct {
	BootID string
	Lines  []Line
	// Fresh is true when there was no cursor for this boot to go on
	// from: the pass only found the end of the log, Lines is empty, and
	// the rules report OK with Started as their message.
	Fresh bool
	// Err is set when the log could not be read (or not to its end in
	// time on a fresh start): rules report ERROR "cannot read the kernel
	// log: …" and keep repeating what they already hold (sticky FAILs).
	Err error
	// Restarted is set when the log started again below the cursor under
	// the same boot id. With an empty BootID (none could be read) that is
	// a reboot, and a rule drops what it keeps for the boot; with a boot
	// id it is a log swapped under us (a fixture), read from its start.
	Restarted bool
	// Trouble is set when the pass went on despite a problem with its
	// cursor (it could not be read, so the log is read from its start):
	// a rule may report it as an ERROR beside its verdicts (gpu.xid does).
	Trouble string
}

// Started is the message of a rule whose first run only found the end of
// the log.
const Started = "kernel log cursor started at the end of the log"

// Reader gives each rule of a run the same snapshot, read at most once.
//
// A rule calls Snapshot when it runs, judges the lines, saves its own
// state, and then calls Judged with its name. The program calls Commit
// once every check has returned: the cursor moves past the snapshot only
// if every rule registered for the run said Judged, so a rule that timed
// out (say, waiting on NVML) sees the same lines again next run rather
// than lose them. A rule says Judged on every path on which it is done
// with the lines, a SKIP ("no NVSwitch on this node") included: a rule
// that never says it holds the cursor forever. It does not say Judged
// when it could not save its state (the lines must come again).
//
// Log is the Reader of a run (it holds the cursor); Fixed serves fixed
// lines, for tests.
type Reader interface {
	Snapshot(ctx context.Context) Snapshot
	Judged(rule string)
}

// Unjudged are the snapshot's lines from sequence number from on: what a
// rule whose own record says it judged this boot's lines up to from has
// not seen yet. The cursor only moves once every rule of a run has judged
// (see Log), so lines can come again: in a job run, which does not run
// every rule, or after a run whose rule timed out. A rule that keeps this
// mark in its state judges each line once all the same.
func (s Snapshot) Unjudged(from uint64) []Line {
	for i, l := range s.Lines {
		if l.Seq >= from {
			return s.Lines[i:]
		}
	}
	return nil
}

// Mark is the mark to keep after judging lines: the sequence number after
// the last of them, or from when there are none.
func Mark(lines []Line, from uint64) uint64 {
	if len(lines) == 0 {
		return from
	}
	return max(from, lines[len(lines)-1].Seq+1)
}
