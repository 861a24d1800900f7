// Package lock keeps two health-check runs from overlapping. slurmd starts
// a new HealthCheckProgram on schedule even when the last one is still
// stuck, so the second must notice and leave at once.
package lock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuhc/gpuhc/internal/sysread"
)

// ErrHeld means another process holds the lock.
var ErrHeld = errors.New("held by another run")

// Lock is a held lock file.
type Lock struct{ f *os.File }

// Try takes an exclusive, non-blocking flock on path, creating it (and its
// directory) if needed. The kernel drops the lock when the process dies, so
// a killed run never leaves a stale lock behind.
func Try(path string) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create lock directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, ErrHeld)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// Say who holds it, so a later run can tell a slow run from a stuck one.
	stamp := fmt.Sprintf("%d %d\n", os.Getpid(), time.Now().Unix())
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(stamp), 0)
	}
	return &Lock{f: f}, nil
}

// Holder reads the pid and start time the current holder wrote.
func Holder(path string) (pid int, since time.Time, err error) {
	b, err := sysread.Regular(path, 4<<10)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("lock holder: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, time.Time{}, fmt.Errorf("lock %s: no holder recorded", path)
	}
	pid, err1 := strconv.Atoi(f[0])
	sec, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 || sec <= 0 {
		return 0, time.Time{}, fmt.Errorf("lock %s: malformed holder %q", path, strings.TrimSpace(string(b)))
	}
	return pid, time.Unix(sec, 0), nil
}

// Release drops the lock.
func (l *Lock) Release() error { return l.f.Close() }
