package ib

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// The fixture trees have no virtual devices; these helpers add them as the
// kernel lays them out, beside the physical function pf.

// addVF makes SR-IOV virtual function fn of pf's PCI function appear as
// RDMA device name, as mlx5_core does when sriov_numvfs > 0 and the VF is
// bound on the host: PCI function <pf bus>:00.<fn> beside the PF, with a
// physfn link to it (and the PF's virtfn<fn-1> link back), its own
// infiniband/<name> whose device link names the VF, and the class link.
func addVF(t testing.TB, root, pf, name string, fn int) {
	t.Helper()
	pfRel := pfPCI(t, root, pf)
	pfAddr := path.Base(pfRel)
	vfAddr := strings.TrimSuffix(pfAddr, "0") + strconv.Itoa(fn)
	vfRel := path.Join(path.Dir(pfRel), vfAddr)
	class := filepath.Join(root, classDir)
	vf := filepath.Join(class, vfRel)
	writeFile(t, vf, "vendor", "0x15b3\n")
	writeFile(t, vf, "device", "0x101e\n") // ConnectX Family mlx5Gen Virtual Function
	writeFile(t, vf, "class", "0x020700\n")
	symlink(t, "../"+pfAddr, filepath.Join(vf, "physfn"))
	symlink(t, "../"+vfAddr, filepath.Join(class, pfRel, "virtfn"+strconv.Itoa(fn-1)))
	addRDMA(t, root, pf, name, vfRel, "../../../"+vfAddr)
}

// addSF makes mlx5 sub-function n of pf appear as RDMA device name: the
// devlink-created mlx5_core.sf.<n> on the auxiliary bus, under the PF's
// PCI function, is the RDMA device's parent; it has no PCI function.
func addSF(t testing.TB, root, pf, name string, n int) {
	t.Helper()
	sf := "mlx5_core.sf." + strconv.Itoa(n)
	sfRel := path.Join(pfPCI(t, root, pf), sf)
	dir := filepath.Join(root, classDir, sfRel)
	writeFile(t, dir, "sfnum", strconv.Itoa(88+n)+"\n")
	symlink(t, "../../../../../../../bus/auxiliary", filepath.Join(dir, "subsystem"))
	addRDMA(t, root, pf, name, sfRel, "../../../"+sf)
}

// pfPCI is pf's PCI function directory, relative to the class directory.
func pfPCI(t testing.TB, root, pf string) string {
	t.Helper()
	target, err := os.Readlink(filepath.Join(root, classDir, pf))
	if err != nil {
		t.Fatal(err)
	}
	return path.Dir(path.Dir(target))
}

// addRDMA writes RDMA device name under parentRel (relative to the class
// directory) with pf's firmware and one port in pf's port's state, every
// judged error counter at 0, and links it into the class.
func addRDMA(t testing.TB, root, pf, name, parentRel, deviceLink string) {
	t.Helper()
	class := filepath.Join(root, classDir)
	ib := filepath.Join(class, parentRel, "infiniband", name)
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(class, pf, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	writeFile(t, ib, "fw_ver", read("fw_ver"))
	writeFile(t, ib, "node_type", "1: CA\n")
	symlink(t, deviceLink, filepath.Join(ib, "device"))
	for _, a := range []string{"state", "phys_state", "rate", "link_layer"} {
		writeFile(t, ib, "ports/1/"+a, read("ports/1/"+a))
	}
	for _, pc := range portCounters {
		writeFile(t, ib, "ports/1/counters/"+pc.name, "0\n")
	}
	symlink(t, path.Join(parentRel, "infiniband", name), filepath.Join(class, name))
}

func symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// removeVirtual makes a VF or SF go away, as at a reboot: the class link
// and the device's directory.
func removeVirtual(t testing.TB, root, name string) {
	t.Helper()
	class := filepath.Join(root, classDir, name)
	target, err := os.Readlink(class)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(filepath.Dir(class), target), class} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
}

// withVirtual is an h100-ndr tree with two VFs of mlx5_0 (mlx5_9, mlx5_10)
// and an SF of mlx5_1 (mlx5_11).
func withVirtual(t testing.TB) string {
	t.Helper()
	root := sysfsfix.Tree(t, sysfsfix.H100NDR)
	addVF(t, root, "mlx5_0", "mlx5_9", 1)
	addVF(t, root, "mlx5_0", "mlx5_10", 2)
	addSF(t, root, "mlx5_1", "mlx5_11", 0)
	return root
}

func TestDiscoverVirtual(t *testing.T) {
	hs, err := discover(context.Background(), withVirtual(t))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		pci     string
		virtual bool
	}{
		"mlx5_0": {"0000:19:00.0", false}, "mlx5_1": {"0000:2b:00.0", false}, "mlx5_8": {"0000:c1:00.0", false},
		"mlx5_9":  {"0000:19:00.1", true}, // VF: its own PCI function, with physfn
		"mlx5_10": {"0000:19:00.2", true},
		"mlx5_11": {"", true}, // SF: on the auxiliary bus, no PCI function
	}
	if len(hs) != 12 {
		t.Fatalf("got %d devices, want 12: %+v", len(hs), hs)
	}
	for _, h := range hs {
		w, named := want[h.Name]
		if !named {
			w.pci, w.virtual = h.PCIAddr, false
		}
		if h.PCIAddr != w.pci || h.Virtual != w.virtual {
			t.Errorf("%s: PCI %q virtual %v, want %q %v", h.Name, h.PCIAddr, h.Virtual, w.pci, w.virtual)
		}
		if len(h.Ports) != 1 || h.Ports[0].Err != nil || h.Ports[0].State != "ACTIVE" {
			t.Errorf("%s: ports %+v", h.Name, h.Ports)
		}
	}
}

// A VF whose class link does not lead to its PCI function (a flattened
// copy of a node's tree) is still known by its device link.
func TestDiscoverVFByDeviceLink(t *testing.T) {
	root := t.TempDir()
	symlink(t, "../0000:19:00.0", filepath.Join(root, "sys/devices/0000:19:00.1/physfn"))
	dev := filepath.Join(root, "sys/devices/flat/infiniband/mlx5_9")
	writeFile(t, dev, "ports/1/state", "4: ACTIVE\n")
	symlink(t, "../../../0000:19:00.1", filepath.Join(dev, "device"))
	symlink(t, "../../devices/flat/infiniband/mlx5_9", filepath.Join(root, classDir, "mlx5_9"))
	hs, err := discover(context.Background(), root)
	if err != nil || len(hs) != 1 {
		t.Fatalf("got %+v, %v", hs, err)
	}
	if !hs[0].Virtual || hs[0].PCIAddr != "0000:19:00.1" {
		t.Errorf("got %+v, want a virtual device at 0000:19:00.1", hs[0])
	}
	// Without the physfn link it is a physical function.
	if err := os.Remove(filepath.Join(root, "sys/devices/0000:19:00.1/physfn")); err != nil {
		t.Fatal(err)
	}
	if hs, _ := discover(context.Background(), root); len(hs) != 1 || hs[0].Virtual {
		t.Errorf("got %+v, want a physical device", hs)
	}
}
