package fabric

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Size caps for reads: kernel files are small, but a garbage fixture or a
// hostile /proc entry must not make us read gigabytes.
const (
	maxAttr = 4 << 10  // one sysfs attribute, /proc/<pid>/stat
	maxProc = 64 << 10 // /proc/<pid>/cmdline or cgroup
	maxStat = 4 << 20  // /proc/stat on a node with thousands of CPUs
)

// at joins the check's root and an absolute path such as "/proc/stat".
func at(root string, elem ...string) string {
	return filepath.Join(append([]string{root}, elem...)...)
}

// readFile reads a whole file of at most max bytes. The error names the
// path once (os errors carry it already, so the inner one is unwrapped).
func readFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, bare(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, bare(err))
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("read %s: larger than %d bytes", path, max)
	}
	return b, nil
}

// bare strips an *fs.PathError down to its errno so paths are not repeated.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// printable makes text read from files safe for a one-line message: drain
// reasons must be a single printable line.
func printable(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '?'
	}, s)
	return strings.TrimSpace(s)
}

// cut shortens s to at most max bytes, on a rune boundary, marking the cut.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max - len("...")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}

// quoteShort quotes a garbage value for a message, cut so the message stays
// short.
func quoteShort(s string) string {
	return fmt.Sprintf("%q", cut(s, 24))
}
