// Package procscan finds running programs by name in /proc: it walks the
// process directories, reads comm, state and start time from
// /proc/<pid>/stat, and argv[0] only when comm alone cannot tell.
//
// A busy node starts and reaps processes while we read, so errors of a
// process that vanished mid-read are not counted as unreadable.
package procscan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuhc/gpuhc/internal/sysread"
)

// CommLen is the most the kernel keeps of a process name in comm
// (TASK_COMM_LEN-1): "nv-fabricmanager" has 16 bytes, so its comm is
// "nv-fabricmanage".
const CommLen = 15

// Walk calls visit with each process directory under root/proc, in name
// order, until visit returns false. It stops with an error when ctx ends.
func Walk(ctx context.Context, root string, visit func(dir string) bool) error {
	dir := filepath.Join(root, "proc")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, sysread.Bare(err))
	}
	for _, e := range ents {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted: %w", ctx.Err())
		}
		if isPID(e.Name()) && !visit(filepath.Join(dir, e.Name())) {
			break
		}
	}
	return nil
}

func isPID(s string) bool {
	return s != "" && len(s) <= 10 && strings.Trim(s, "0123456789") == ""
}

// Stat is what gpuhc uses of /proc/<pid>/stat.
type Stat struct {
	Comm  string
	State byte // 'S', 'R', ...; 'Z' and 'X' are dead
	raw   []byte
	after [][]byte // the fields after comm, State's first
}

// Dead is a zombie or a dying process: a dead daemon is not running,
// even while its parent has not reaped it.
func (s Stat) Dead() bool { return s.State == 'Z' || s.State == 'X' }

// Start is field 22, the start time in clock ticks (USER_HZ) after boot.
// Fields after comm start at field 3 (state), so it is the 20th of them.
func (s Stat) Start() (uint64, error) {
	if len(s.after) < 20 {
		return 0, fmt.Errorf("too few fields after comm in %s", sysread.QuoteShort(string(s.raw)))
	}
	start, err := strconv.ParseUint(string(s.after[19]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("start time %s is not a number", sysread.QuoteShort(string(s.after[19])))
	}
	return start, nil
}

// ReadStat reads and parses dir/stat, dir being a /proc/<pid> directory.
func ReadStat(dir string) (Stat, error) {
	path := filepath.Join(dir, "stat")
	b, err := sysread.File(path, sysread.MaxAttr)
	if err != nil {
		return Stat{}, err
	}
	st, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("parse %s: %w", path, err)
	}
	return st, nil
}

// ParseStat reads "812 (nv-hostengine) S 1 812 ...". comm may itself hold
// spaces and parentheses, so it runs to the last ')'.
func ParseStat(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return Stat{}, fmt.Errorf("no (comm) in %s", sysread.QuoteShort(string(b)))
	}
	after := bytes.Fields(b[end+1:])
	if len(after) == 0 || len(after[0]) != 1 {
		return Stat{}, fmt.Errorf("no state after comm in %s", sysread.QuoteShort(string(b)))
	}
	return Stat{Comm: string(b[open+1 : end]), State: after[0][0], raw: b, after: after}, nil
}

// Runs says whether the process in dir, whose comm is comm, runs the
// program name: comm is name, or comm is the kernel's cut of name and
// argv[0] does not say otherwise. An empty argv[0], or one rewritten into
// a title with spaces ("nvidia-persistenced: worker"), cannot disprove
// the comm match. cmdline (at most maxCmdline bytes) is read only for
// such a cut: the read can block on a process stuck in the kernel, so it
// is avoided for every other pid.
func Runs(dir, comm, name string, maxCmdline int64) (bool, error) {
	switch {
	case comm == name:
		return true, nil
	case len(name) <= CommLen || len(comm) != CommLen || name[:CommLen] != comm:
		return false, nil
	}
	b, err := sysread.File(filepath.Join(dir, "cmdline"), maxCmdline)
	if err != nil {
		return false, err
	}
	argv0, _, _ := bytes.Cut(b, []byte{0})
	s := string(argv0)
	return s == "" || strings.Contains(s, " ") || filepath.Base(s) == name, nil
}

// Vanished reports errors of a process that exited while we read it.
func Vanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// Unreadable counts the processes that could not be read, keeping the
// first error for the message; vanished processes are not counted.
type Unreadable struct {
	N     int
	First error
}

// Note counts err unless the process vanished.
func (u *Unreadable) Note(err error) {
	if Vanished(err) {
		return
	}
	u.N++
	if u.First == nil {
		u.First = err
	}
}
