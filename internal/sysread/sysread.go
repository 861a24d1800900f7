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
	"unicode"
	"unicode/utf8"
)

// MaxAttr caps one sysfs attribute: the kernel writes an attribute into
// a single page.
const MaxAttr = 4 << 10

// shortValue is how much of a garbage value QuoteShort keeps: enough to
// recognise it, short enough to leave room in a 256-byte drain reason.
const shortValue = 24

// File reads a whole file of at most max bytes. The error names the path
// once (os errors carry it already, so the inner one is unwrapped).
func File(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, Bare(err))
	}
	defer f.Close()
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
