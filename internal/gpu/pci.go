package gpu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gpuhc/gpuhc/internal/sysread"
)

// NVIDIAOnBus lists the PCI addresses of NVIDIA VGA (0x0300) and 3D
// (0x0302) controllers in sysfs under root: the GPUs the node has whatever
// NVML says, so that one which fell off the bus can be named.
//
// A device whose vendor or class cannot be read might be a GPU: the list
// is then unknown, an error, never a shorter list (it would lower the
// count a GPU is expected against). A device gone between the listing and
// the read (ENOENT: it left the bus) is not on it.
func NVIDIAOnBus(root string) ([]string, error) {
	dir := filepath.Join(root, "sys/bus/pci/devices")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		vendor, err := readID(filepath.Join(dir, e.Name(), "vendor"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if vendor != "0x10de" {
			continue
		}
		class, err := readID(filepath.Join(dir, e.Name(), "class"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(class, "0x0300") || strings.HasPrefix(class, "0x0302") {
			out = append(out, NormalizePCI(e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// readID reads a PCI id attribute: "0x10de", "0x030200".
func readID(path string) (string, error) {
	s, err := sysread.Attr(path)
	if err != nil {
		return "", err
	}
	s = strings.ToLower(s)
	if len(s) < 3 || len(s) > 10 || !strings.HasPrefix(s, "0x") || strings.Trim(s[2:], "0123456789abcdef") != "" {
		return "", fmt.Errorf("%s: %s is not a PCI id", path, sysread.QuoteShort(s))
	}
	return s, nil
}
