package fabric

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

// pciScan is what the PCI bus shows of NVSwitches.
type pciScan struct {
	switches []string // PCI addresses
	// unreadable counts devices whose vendor or class could not be read
	// or was not a hex number; firstErr is the first such error.
	unreadable int
	firstErr   error
}

// findNVSwitches lists the NVSwitches under root/sys/bus/pci/devices:
// vendor 0x10de (NVIDIA) and class 0x0680xx (bridge, other), which is how
// every NVSwitch generation (DGX-2's to Hopper's 0x22a3) shows itself. A
// node without that directory has no PCI bus to speak of: no NVSwitch.
func findNVSwitches(root string) (pciScan, error) {
	dir := at(root, "sys/bus/pci/devices")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return pciScan{}, nil
	}
	if err != nil {
		return pciScan{}, fmt.Errorf("list %s: %w", dir, sysread.Bare(err))
	}
	var sc pciScan
	for _, e := range ents {
		dev := filepath.Join(dir, e.Name())
		vendor, err := readHexAttr(filepath.Join(dev, "vendor"))
		if err == nil && vendor != "0x10de" {
			continue // most devices: no need to read their class
		}
		var class string
		if err == nil {
			class, err = readHexAttr(filepath.Join(dev, "class"))
		}
		switch {
		case err != nil:
			sc.unreadable++
			if sc.firstErr == nil {
				sc.firstErr = err
			}
		case strings.HasPrefix(class, "0x0680"):
			sc.switches = append(sc.switches, e.Name())
		}
	}
	sort.Strings(sc.switches)
	return sc, nil
}

// readHexAttr reads a sysfs attribute such as "0x10de" or "0x068000",
// lower-cased; anything else is an error.
func readHexAttr(path string) (string, error) {
	b, err := sysread.File(path, sysread.MaxAttr)
	if err != nil {
		return "", err
	}
	v := strings.ToLower(strings.TrimSpace(string(b)))
	if len(v) < 3 || !strings.HasPrefix(v, "0x") || strings.Trim(v[2:], "0123456789abcdef") != "" {
		return "", fmt.Errorf("%s: %s is not a hex number", path, sysread.QuoteShort(v))
	}
	return v, nil
}
