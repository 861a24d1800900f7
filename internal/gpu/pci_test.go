package gpu

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestNormalizePCI(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:4E:00.0": "0000:4e:00.0", // NVML
		"0000:4e:00.0":     "0000:4e:00.0", // sysfs
		"0000:4e:00":       "0000:4e:00.0", // kernel log (Xid)
		"4E:00.0":          "0000:4e:00.0",
		" 0001:9A:00.1\n":  "0001:9a:00.1",
		"00000002:18:00.0": "0002:18:00.0",
		"00000000:18:00.0": "0000:18:00.0",
		// A VMD domain: NVML's 8 digits, sysfs's 5, not cut to 4.
		"00010000:01:00.0": "10000:01:00.0",
		"10000:01:00.0":    "10000:01:00.0",
		"0000FFFF:01:00.0": "ffff:01:00.0",
		"0001000A:E1:00":   "1000a:e1:00.0",
		// Not addresses: left for the caller to refuse, not turned into one.
		"../../etc":         "../../etc",
		"zzzz:18:00.0":      "zzzz:18:00.0",
		"000000000:18:00.0": "000000000:18:00.0",
	} {
		if got := NormalizePCI(in); got != want {
			t.Errorf("NormalizePCI(%q) = %q, want %q", in, got, want)
		}
	}
}

// basePCIDevice lays out a PCI function as the kernel does: the device
// directory under /sys/devices, a symlink to it in /sys/bus/pci/devices.
func basePCIDevice(t *testing.T, root, parent, addr, vendor, class string) {
	t.Helper()
	dev := filepath.Join(root, "sys/devices", parent, addr)
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"vendor": vendor + "\n", "class": class + "\n", "device": "0x2330\n"} {
		if err := os.WriteFile(filepath.Join(dev, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bus := filepath.Join(root, "sys/bus/pci/devices")
	if err := os.MkdirAll(bus, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("../../../devices", parent, addr), filepath.Join(bus, addr)); err != nil {
		t.Fatal(err)
	}
}

func TestNVIDIAOnBus(t *testing.T) {
	root := t.TempDir()
	basePCIDevice(t, root, "pci0000:00", "0000:00:00.0", "0x8086", "0x060000")              // host bridge
	basePCIDevice(t, root, "pci0000:00", "0000:03:00.0", "0x1a03", "0x030000")              // ASPEED BMC VGA
	basePCIDevice(t, root, "pci0000:97/0000:97:01.0", "0000:9a:00.0", "0x10de", "0x030200") // H100 (3D)
	basePCIDevice(t, root, "pci0000:17/0000:17:01.0", "0000:18:00.0", "0x10de", "0x030200")
	basePCIDevice(t, root, "pci0000:00", "0000:07:00.0", "0x10de", "0x030000") // VGA-class NVIDIA GPU
	basePCIDevice(t, root, "pci0000:00", "0000:05:00.0", "0x10de", "0x068000") // NVSwitch bridge
	basePCIDevice(t, root, "pci0000:00", "0000:29:00.0", "0x15b3", "0x020700") // ConnectX IB
	got, err := NVIDIAOnBus(root)
	want := []string{"0000:07:00.0", "0000:18:00.0", "0000:9a:00.0"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
}

func TestNVIDIAOnBusEmpty(t *testing.T) {
	if got, err := NVIDIAOnBus(t.TempDir()); err != nil || len(got) != 0 {
		t.Errorf("no sysfs: %v %v", got, err)
	}
	root := t.TempDir()
	basePCIDevice(t, root, "pci0000:00", "0000:00:00.0", "0x8086", "0x060000")
	if got, err := NVIDIAOnBus(root); err != nil || len(got) != 0 {
		t.Errorf("no NVIDIA: %v %v", got, err)
	}
}

// An unreadable vendor or class might hide a GPU: the list is unknown
// (an error), not one GPU short. A device gone mid-scan is not on it.
func TestNVIDIAOnBusUnreadable(t *testing.T) {
	tests := []struct {
		name, vendor, class string
		gone                bool
		want                string // error text; "" for the one GPU that is left
	}{
		{name: "garbage class", vendor: "0x10de", class: "\xff\xfe", want: "is not a PCI id"},
		{name: "garbage vendor", vendor: "vendor?", class: "0x030200", want: "is not a PCI id"},
		{name: "class is a directory", vendor: "0x10de", class: "", want: "class"},
		{name: "gone from the bus", vendor: "0x10de", class: "0x030200", gone: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			basePCIDevice(t, root, "pci0000:17/0000:17:01.0", "0000:18:00.0", "0x10de", "0x030200")
			basePCIDevice(t, root, "pci0000:97/0000:97:01.0", "0000:9a:00.0", tc.vendor, tc.class)
			dev := filepath.Join(root, "sys/devices/pci0000:97/0000:97:01.0/0000:9a:00.0")
			switch {
			case tc.gone: // the bus link stays, the device is gone
				if err := os.RemoveAll(dev); err != nil {
					t.Fatal(err)
				}
			case tc.class == "":
				if err := os.Remove(filepath.Join(dev, "class")); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(filepath.Join(dev, "class"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got, err := NVIDIAOnBus(root)
			if tc.want == "" {
				if err != nil || !reflect.DeepEqual(got, []string{"0000:18:00.0"}) {
					t.Errorf("got %v, %v; want the GPU that is left", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || got != nil {
				t.Errorf("got %v, %v; want no list and an error saying %q", got, err, tc.want)
			}
		})
	}
}
