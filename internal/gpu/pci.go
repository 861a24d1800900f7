package gpu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// NVIDIAOnBus lists the PCI addresses of NVIDIA VGA (0x0300) and 3D
// (0x0302) controllers in sysfs under root: the GPUs the node has whatever
// NVML says, so that one which fell off the bus can be named.
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
		vendor := readHex(filepath.Join(dir, e.Name(), "vendor"))
		class := readHex(filepath.Join(dir, e.Name(), "class"))
		if vendor == "0x10de" && (strings.HasPrefix(class, "0x0300") || strings.HasPrefix(class, "0x0302")) {
			out = append(out, NormalizePCI(e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

func readHex(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 32 {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(string(b)))
}
