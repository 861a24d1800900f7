// Package lock keeps two health-check runs from overlapping. slurmd starts
// a new HealthCheckProgram on schedule even when the last one is still
// stuck, so the second must notice and leave at once.
package lock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
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
	return &Lock{f: f}, nil
}

// Release drops the lock.
func (l *Lock) Release() error { return l.f.Close() }
