package epilog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Killer ends leftover processes of the job.
type Killer interface {
	// Kill ends procs, all together: SIGTERM to each, one wait of up to
	// grace for them all, SIGKILL to those left, one wait of up to wait.
	// Each is signalled only while it is still the process judged (the
	// Proc given): the same start time, uids and job, as read again once
	// it is pinned. It returns one outcome per proc, in order.
	Kill(ctx context.Context, procs []Proc, grace, wait time.Duration) []KillOutcome
}

// KillResult is what became of one process.
type KillResult int

const (
	// KillGone: it ended (or was gone before any signal).
	KillGone KillResult = iota
	// KillChanged: the pid no longer names the process judged (it
	// ended and the pid was reused, or its uids or job changed): not
	// signalled.
	KillChanged
	// KillError: it could not be pinned, read again or signalled.
	KillError
	// KillAlive: still there when the wait after SIGKILL ended.
	KillAlive
)

// KillOutcome is what Kill did with one process.
type KillOutcome struct {
	Result KillResult
	// Err says why, for KillChanged and KillError.
	Err error
	// AfterKill is how long a KillAlive process has outlived SIGKILL,
	// and State its /proc state then ('D': uninterruptible, stuck in the
	// kernel; 0 unknown).
	AfterKill time.Duration
	State     byte
}

// SysKiller kills real processes, by pid, with signals; never through a
// shell, never by name. It only works on the real /proc: a fixture root
// names processes that are not the pids of this host.
type SysKiller struct{}

// target is one process pinned for signals.
type target struct {
	i   int // index in procs and outcomes
	pid int
	fd  int // pidfd; -1 without pidfds (Linux < 5.3): signals by pid
}

// Kill pins each process with a pidfd first (Linux 5.3+), then reads it
// again: a pidfd signals the process it was opened on and no other, and
// while that process lives its pid names it, so a read that finds the
// same start time, uids and job is of the process judged, and the
// signals reach it even if the pid is reused meanwhile. Without pidfds
// it signals by pid after the same check, which leaves a short window.
func (SysKiller) Kill(ctx context.Context, procs []Proc, grace, wait time.Duration) []KillOutcome {
	// Each outcome starts as KillGone, the zero value: a process that
	// ends during a wait keeps it.
	out := make([]KillOutcome, len(procs))
	var pinned []target
	// Each pidfd is closed here, once, whatever became of its process.
	defer func() {
		for _, t := range pinned {
			if t.fd >= 0 {
				unix.Close(t.fd)
			}
		}
	}()
	for i, p := range procs {
		t, o, ok := pin(i, p)
		if !ok {
			out[i] = o
			continue
		}
		pinned = append(pinned, t)
	}
	live := signalAll(pinned, unix.SIGTERM, out)
	live = waitAll(ctx, live, grace)
	if len(live) > 0 {
		live = signalAll(live, unix.SIGKILL, out)
		sent := time.Now()
		live = waitAll(ctx, live, wait)
		for _, t := range live {
			state, _, _ := readStat(filepath.Join("/proc", strconv.Itoa(t.pid)))
			out[t.i] = KillOutcome{Result: KillAlive, AfterKill: time.Since(sent), State: state}
		}
	}
	return out
}

// pin opens a pidfd on p's pid and checks that it is still the process
// judged. ok false: not to be signalled, and o says why.
func pin(i int, p Proc) (t target, o KillOutcome, ok bool) {
	refuse := func(format string, a ...any) (target, KillOutcome, bool) {
		return target{}, KillOutcome{Result: KillError, Err: fmt.Errorf("refusing: "+format, a...)}, false
	}
	// The judge never hands these over; a second guard where it matters.
	switch {
	case p.PID <= 1:
		return refuse("not a user process")
	case p.UIDs[0] <= 0 || !p.OwnedBy(p.UIDs[0]):
		return refuse("uids %v: root's, or not all one user's", p.UIDs)
	case p.JobID == "":
		return refuse("no job id in its cgroup or environment")
	case p.StartTime == 0:
		return refuse("start time unknown")
	}
	fd, err := unix.PidfdOpen(p.PID, 0)
	switch {
	case errors.Is(err, unix.ESRCH):
		return target{}, KillOutcome{Result: KillGone}, false
	case errors.Is(err, unix.ENOSYS):
		fd = -1
	case err != nil:
		return target{}, KillOutcome{Result: KillError, Err: fmt.Errorf("pidfd_open: %w", err)}, false
	}
	t = target{i: i, pid: p.PID, fd: fd}
	drop := func(o KillOutcome) (target, KillOutcome, bool) {
		if fd >= 0 {
			unix.Close(fd)
		}
		return target{}, o, false
	}
	q, err := ReadProc("/", p.PID)
	switch {
	case errors.Is(err, errGone):
		return drop(KillOutcome{Result: KillGone})
	case err != nil:
		return drop(KillOutcome{Result: KillError, Err: fmt.Errorf("read again: %w", err)})
	}
	// Read, then still alive: the read was of the pinned process.
	if ended(t) {
		return drop(KillOutcome{Result: KillGone})
	}
	var why string
	switch {
	case q.StartTime != p.StartTime:
		why = fmt.Sprintf("started at tick %d, judged %d: pid reused", q.StartTime, p.StartTime)
	case q.UIDs != p.UIDs:
		why = fmt.Sprintf("uids now %v, judged %v", q.UIDs, p.UIDs)
	case q.JobID != p.JobID:
		why = fmt.Sprintf("job now %q, judged %q", q.JobID, p.JobID)
	}
	if why != "" {
		return drop(KillOutcome{Result: KillChanged, Err: errors.New(why)})
	}
	return t, KillOutcome{}, true
}

// signalAll sends sig to every target; those that turn out gone, or that
// cannot be signalled, get their outcome and leave the list.
func signalAll(ts []target, sig unix.Signal, out []KillOutcome) []target {
	var live []target
	for _, t := range ts {
		var err error
		if t.fd >= 0 {
			err = unix.PidfdSendSignal(t.fd, sig, nil, 0)
		} else {
			err = unix.Kill(t.pid, sig)
		}
		switch {
		case errors.Is(err, unix.ESRCH):
			out[t.i] = KillOutcome{Result: KillGone}
		case err != nil:
			out[t.i] = KillOutcome{Result: KillError, Err: fmt.Errorf("%s: %w", unix.SignalName(sig), err)}
		default:
			live = append(live, t)
		}
	}
	return live
}

// waitAll waits up to d, or until ctx ends, for the targets to end, and
// returns those still there. A zero d still looks once.
func waitAll(ctx context.Context, ts []target, d time.Duration) []target {
	end := time.Now().Add(d)
	for {
		var live []target
		for _, t := range ts {
			if !ended(t) {
				live = append(live, t)
			}
		}
		ts = live
		if len(ts) == 0 || ctx.Err() != nil || !time.Now().Before(end) {
			return ts
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(pollEvery, time.Until(end))):
		}
	}
}

// pollEvery is how often waitAll looks again.
const pollEvery = 20 * time.Millisecond

// ended: a readable pidfd (the process has exited), or, without one, a
// pid that is gone or a zombie.
func ended(t target) bool {
	if t.fd < 0 {
		return exited(t.pid)
	}
	fds := []unix.PollFd{{Fd: int32(t.fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// exited: no /proc entry, or a zombie waiting for its parent.
func exited(pid int) bool {
	state, _, err := readStat(filepath.Join("/proc", strconv.Itoa(pid)))
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	return err == nil && (state == 'Z' || state == 'X')
}
