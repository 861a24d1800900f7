package fabric

import (
	"path/filepath"

	"github.com/gpuhc/gpuhc/internal/sysread"
)

// Size caps for reads beyond one attribute (sysread.MaxAttr): a garbage
// fixture or a hostile /proc entry must not make us read gigabytes.
const (
	maxProc = 64 << 10 // /proc/<pid>/cmdline or cgroup
	maxStat = 4 << 20  // /proc/stat on a node with thousands of CPUs
)

// at joins the check's root and an absolute path such as "/proc/stat".
func at(root string, elem ...string) string {
	return filepath.Join(append([]string{root}, elem...)...)
}

// printable is sysread.Printable, applied to every message.
func printable(s string) string { return sysread.Printable(s) }
