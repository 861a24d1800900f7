package kernlog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
)

// pciTree writes a sysfs PCI tree under a temporary root in the kernel's
// layout: device directories nested under their bridges in sys/devices,
// and sys/bus/pci/devices/<addr> links to them. devs maps a device's path
// below sys/devices to its vendor id.
func pciTree(t *testing.T, devs map[string]string) string {
	t.Helper()
	root := t.TempDir()
	bus := filepath.Join(root, "sys/bus/pci/devices")
	if err := os.MkdirAll(bus, 0o755); err != nil {
		t.Fatal(err)
	}
	for path, vendor := range devs {
		dir := filepath.Join(root, "sys/devices", path)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "vendor"), []byte(vendor+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../../../devices/"+path, filepath.Join(bus, filepath.Base(path))); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// An HGX-like slice: a GPU and an HCA behind one PCIe switch, an NVMe
// drive on a root port of its own.
var hgx = map[string]string{
	"pci0000:17/0000:17:01.0":                                        "0x8086",
	"pci0000:17/0000:17:01.0/0000:18:00.0":                           "0x1000", // PCIe switch upstream port
	"pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:00.0":              "0x1000", // downstream port
	"pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:00.0/0000:1a:00.0": "0x10de", // GPU
	"pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:01.0":              "0x1000",
	"pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:01.0/0000:1b:00.0": "0x15b3", // HCA
	"pci0000:80/0000:80:1b.4":                                        "0x8086",
	"pci0000:80/0000:80:1b.4/0000:81:00.0":                           "0x144d", // NVMe
}

func TestAERPath(t *testing.T) {
	root := pciTree(t, hgx)
	tests := []struct {
		dev    string
		status check.Status
		action check.Action
		msg    string
	}{
		{"0000:1a:00.0", check.Fail, check.ActionDrain, "PCIe AER uncorrected non-fatal error"}, // the GPU
		{"0000:1b:00.0", check.Fail, check.ActionDrain, ""},                                     // the HCA
		{"0000:19:00.0", check.Fail, check.ActionDrain, ""},                                     // the GPU's switch port
		{"0000:17:01.0", check.Fail, check.ActionDrain, ""},                                     // their root port
		{"0000:19:01.0", check.Fail, check.ActionDrain, ""},
		{"0000:80:1b.4", check.Warn, check.ActionNone, "not on a GPU, HCA or NVSwitch path"},
		{"0000:81:00.0", check.Warn, check.ActionNone, "not on a GPU, HCA or NVSwitch path"},
	}
	for _, tt := range tests {
		t.Run(tt.dev, func(t *testing.T) {
			n := newNode(t)
			n.paths = NewPaths(root, nil)
			r := one(t, must(n.run(replay("b", fmt.Sprintf(aerNon, tt.dev)))))
			if r.Component != tt.dev || r.Status != tt.status || r.Action != tt.action || !strings.Contains(r.Message, tt.msg) {
				t.Errorf("got %s %s %s: %s, want %s %s", r.Component, r.Status, r.Action, r.Message, tt.status, tt.action)
			}
			if tt.status == check.Fail && r.IDs.PCIBusID != tt.dev {
				t.Errorf("IDs %+v", r.IDs)
			}
			// Off the path it is a WARN: not held for the boot.
			next := one(t, must(n.run(replay("b"))))
			if (next.Status == check.Fail) != (tt.status == check.Fail) {
				t.Errorf("next run: %+v", next)
			}
		})
	}
	// A fatal error drains wherever it is.
	n := newNode(t)
	n.paths = NewPaths(root, nil)
	fatal := "nvme 0000:81:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)"
	if r := one(t, must(n.run(replay("b", fatal)))); r.Status != check.Fail || r.Action != check.ActionReboot {
		t.Errorf("fatal off the path: %+v", r)
	}
}

// The PCI bus is read only when an AER line asks, once per run.
func TestPathsReadOnlyWhenAsked(t *testing.T) {
	calls := 0
	devices := func(context.Context) ([]string, error) { calls++; return []string{"0000:1a:00.0"}, nil }
	n := newNode(t)
	n.paths = NewPaths(pciTree(t, hgx), devices)
	n.run(replay("b", lockup, ioErr, hung))
	if calls != 0 {
		t.Errorf("healthy-path run listed devices %d times", calls)
	}
	n.paths = NewPaths(pciTree(t, hgx), devices)
	n.run(replay("b", fmt.Sprintf(aerNon, "0000:17:01.0"), fmt.Sprintf(aerNon, "0000:80:1b.4")))
	if calls != 1 {
		t.Errorf("two AER lines listed devices %d times, want 1", calls)
	}
}

// Devices that cannot be listed: a non-fatal error drains, and says why.
func TestPathUnknown(t *testing.T) {
	n := newNode(t)
	n.paths = NewPaths(filepath.Join(t.TempDir(), "no-sysfs"), nil)
	r := one(t, must(n.run(replay("b", fmt.Sprintf(aerNon, "0000:80:1b.4")))))
	if r.Status != check.Fail || !strings.Contains(r.Message, "could not tell") {
		t.Errorf("unknown path: %+v", r)
	}
}

func TestBusDevices(t *testing.T) {
	got, err := BusDevices(pciTree(t, hgx))(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "0000:1a:00.0 0000:1b:00.0" {
		t.Errorf("BusDevices = %q", got)
	}
}
