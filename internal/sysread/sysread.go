// Package sysread reads kernel files (sysfs, procfs) with a size cap and
// makes the text read from them safe for one-line messages.
//
// Kernel files are small, but a garbage fixture or a hostile /proc entry
// must not make a check read gigabytes, and a drain reason must stay a
// single short printable line whatever the file held.
package sysread

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// MaxAttr caps one sysfs attribute: the kernel writes an attribute into
// a single page.
const MaxAttr = 4 << 10

// shortValue is how much of a garbage value QuoteShort keeps: enough to
// recognise it, short enough to leave room in a 256-byte drain reason.
const shortValue = 24

// ErrNotRegular is a path that is not a regular file: every file gpuhc
// reads (sysfs and procfs attributes, its config, token, state and logs)
// is one, and anything else can block (a FIFO) or never end (a device).
var ErrNotRegular = errors.New("not a regular file")

// Open opens path for reading the one way gpuhc opens a file it did not
// write itself: without blocking (O_NONBLOCK: opening a FIFO for reading
// otherwise waits for a writer), without taking a terminal, and only if
// what it opened is a regular file. Links are followed: sysfs is made of
// them. The error names the path once.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, Bare(err))
	}
	if err := regular(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// OpenFile is os.OpenFile for a log gpuhc appends to, with Open's rules:
// opening a FIFO for writing would otherwise wait for a reader (with
// O_NONBLOCK it fails, ENXIO, or opens and is refused here), and only a
// regular file is written to.
func OpenFile(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK|syscall.O_NOCTTY, perm)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, Bare(err))
	}
	if err := regular(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// regular checks the opened file, not the path, so that the file judged is
// the file read.
func regular(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read %s: %w", path, Bare(err))
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("read %s: %w (%s)", path, ErrNotRegular, kind(fi.Mode()))
	}
	return nil
}

// kind names a file type for an error message.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	}
	return "type " + m.Type().String()
}

// Regular reads a whole file of at most max bytes, opened as Open does:
// how gpuhc reads the files an admin or another program controls (its
// config, the token, state records, event logs, the Fabric Manager log).
func Regular(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Capped(f, path, max)
}

// File reads a whole kernel file (sysfs, procfs) of at most max bytes.
// Unlike Regular it opens the path as it is: a kernel pseudo-file cannot
// be a FIFO or a device short of a bind mount over it, and the hang that
// does happen, a read stuck in a wedged driver or filesystem, blocks a
// regular file just the same. That is the runner's to bound (a check's
// timeout abandons it), and the end-to-end tests make such a hang with a
// FIFO bound over /proc/meminfo. The error names the path once.
func File(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, Bare(err))
	}
	defer f.Close()
	return Capped(f, path, max)
}

// Capped reads what is left of f, at most max bytes; more is an error
// naming path.
func Capped(f io.Reader, path string, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, Bare(err))
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("read %s: larger than %d bytes", path, max)
	}
	return b, nil
}

// Text reads a file of at most max bytes as a string without surrounding
// white space (a sysfs attribute's trailing newline).
func Text(path string, max int64) (string, error) {
	b, err := File(path, max)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Attr reads a one-line sysfs attribute of at most MaxAttr bytes, without
// its newline.
func Attr(path string) (string, error) { return Text(path, MaxAttr) }

// Bare strips an *fs.PathError down to its errno, for a caller whose own
// message names the path already.
func Bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Printable makes text read from the kernel safe for a one-line message
// or component: drain reasons must be a single printable line. Invalid
// UTF-8 and unprintable characters become '?'.
func Printable(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '?'
	}, s)
	return strings.TrimSpace(s)
}

// QuoteShort quotes a garbage value for a message, cut so that the
// message stays short.
func QuoteShort(s string) string {
	if len(s) > shortValue {
		s = prefix(s, shortValue) + "..."
	}
	return strconv.Quote(s)
}

// Cut shortens s to at most max bytes, on a rune boundary, marking the
// cut with "...".
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return prefix(s, max-len("...")) + "..."
}

// prefix is the longest start of s of at most n bytes that does not split
// a rune.
func prefix(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
