package epilog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Killer ends a leftover process of the job's user.
type Killer interface {
	// Kill sends SIGTERM to pid, then SIGKILL if it is still there after
	// grace, but only while /proc shows every uid of the process as uid.
	// gone reports that it no longer runs.
	Kill(ctx context.Context, pid, uid int, grace time.Duration) (gone bool, err error)
}

// errNotOwner: the pid now belongs to someone else (it was reused).
var errNotOwner = errors.New("no longer the job user's process")

// killAfter is how long SIGKILL is given to take effect.
const killAfter = time.Second

// SysKiller kills real processes, by pid, with signals; never through a
// shell, never by name. It only works on the real /proc: a fixture root
// names processes that are not the pids of this host.
type SysKiller struct{}

// Kill pins the process with a pidfd first (Linux 5.3+), so that the
// ownership checked is that of the process signalled, even if the pid is
// reused meanwhile; without pidfds it re-checks and signals by pid.
func (SysKiller) Kill(ctx context.Context, pid, uid int, grace time.Duration) (bool, error) {
	if pid <= 1 || uid <= 0 {
		return false, fmt.Errorf("pid %d uid %d: refusing", pid, uid)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case errors.Is(err, unix.ESRCH):
		return true, nil
	case errors.Is(err, unix.ENOSYS):
		fd = -1
	case err != nil:
		return false, fmt.Errorf("pidfd_open %d: %w", pid, err)
	default:
		defer unix.Close(fd)
	}
	p, err := ReadProc("/", pid)
	if errors.Is(err, errGone) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if !p.OwnedBy(uid) {
		return false, fmt.Errorf("pid %d (%s, uids %v): %w", pid, p.Comm, p.UIDs, errNotOwner)
	}
	signal := func(sig unix.Signal) error {
		if fd >= 0 {
			return unix.PidfdSendSignal(fd, sig, nil, 0)
		}
		return unix.Kill(pid, sig)
	}
	for _, step := range []struct {
		sig  unix.Signal
		wait time.Duration
	}{{unix.SIGTERM, grace}, {unix.SIGKILL, killAfter}} {
		if err := signal(step.sig); errors.Is(err, unix.ESRCH) {
			return true, nil
		} else if err != nil {
			return false, fmt.Errorf("signal %d to pid %d: %w", step.sig, pid, err)
		}
		if waitGone(ctx, fd, pid, step.wait) {
			return true, nil
		}
	}
	return false, nil
}

// waitGone waits up to d for the process to end: readable pidfd, or,
// without one, a pid that is gone or a zombie.
func waitGone(ctx context.Context, fd, pid int, d time.Duration) bool {
	end := time.Now().Add(d)
	for {
		if fd >= 0 {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if n, err := unix.Poll(fds, 50); err == nil && n > 0 {
				return true
			}
		} else {
			if exited(pid) {
				return true
			}
			time.Sleep(50 * time.Millisecond)
		}
		if ctx.Err() != nil || time.Now().After(end) {
			return false
		}
	}
}

// exited: no /proc entry, or a zombie waiting for its parent.
func exited(pid int) bool {
	b, err := readCapped(filepath.Join("/proc", strconv.Itoa(pid), "stat"), maxStatus)
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}
