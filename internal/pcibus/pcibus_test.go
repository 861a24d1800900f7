package pcibus

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// On the modelled trees (internal/sysfsfix: generated in the kernel's
// sysfs layout, not captured), the bus shows what NVIDIA's system specs
// give each machine: a DGX H100 8 H100s and 4 NVSwitches (DGX H100 User
// Guide, "Hardware Overview"); an HGX B200 8 B200s and no NVSwitch on the
// PCI bus (NVLink5 switches are reached through ConnectX management
// functions, internal/ib/vpd.go).
func TestScanRealTrees(t *testing.T) {
	for _, tc := range []struct {
		tree           string
		gpus, switches int
	}{{sysfsfix.H100NDR, 8, 4}, {sysfsfix.B200, 8, 0}} {
		b, err := Scan(context.Background(), sysfsfix.Tree(t, tc.tree))
		if err != nil {
			t.Fatal(err)
		}
		gpus, err := b.GPUs()
		if err != nil || len(gpus) != tc.gpus || len(b.Switches()) != tc.switches {
			t.Errorf("%s: %d GPUs (%v), %d NVSwitches; want %d and %d", tc.tree, len(gpus), err, len(b.Switches()), tc.gpus, tc.switches)
		}
		if !slices.IsSorted(gpus) {
			t.Errorf("%s: GPUs not in bus order: %v", tc.tree, gpus)
		}
	}
}

func TestScanEdges(t *testing.T) {
	if b, err := Scan(context.Background(), t.TempDir()); err != nil || len(b.NVIDIA) != 0 {
		t.Errorf("no sysfs: %+v, %v; want an empty bus", b, err)
	}
	root := sysfsfix.Tree(t, sysfsfix.H100NDR)
	b, _ := Scan(context.Background(), root)
	gpu := b.Of("0x0302")[0]
	class := filepath.Join(root, "sys/bus/pci/devices", gpu, "class")
	if err := os.WriteFile(class, []byte("3D controller\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Scan(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if gpus, err := b.GPUs(); err == nil || gpus != nil || !strings.Contains(err.Error(), "1 PCI devices unreadable") {
		t.Errorf("garbage class: %v, %v; want no list and an error", gpus, err)
	}
	if len(b.Switches()) != 4 {
		t.Errorf("the NVSwitches are still known: %v", b.Switches())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Scan(ctx, root); err == nil {
		t.Error("a cancelled scan returned no error")
	}
}

// A Gather scans once; a scan cut short by its caller's context is not
// kept, so a later caller scans again.
func TestGather(t *testing.T) {
	n := 0
	g := GatherWith(func(ctx context.Context) (Bus, error) {
		n++
		if err := ctx.Err(); err != nil {
			return Bus{}, err
		}
		return Bus{NVIDIA: []Function{{Addr: "0000:18:00.0", Class: "0x030200"}}}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Bus(ctx); err == nil {
		t.Fatal("cancelled caller got no error")
	}
	for range 3 {
		if gpus, err := g.GPUs(); err != nil || len(gpus) != 1 {
			t.Fatalf("%v, %v", gpus, err)
		}
	}
	if n != 2 {
		t.Errorf("%d scans, want 2 (the cancelled one, then one kept)", n)
	}
}
