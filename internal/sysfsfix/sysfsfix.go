// Package sysfsfix provides sysfs fixture trees of GPU nodes (InfiniBand
// and RoCE HCAs, GPUs, NVSwitches, PCIe switches, NUMA, CPU and HCA
// temperatures, /proc/modules) laid out as the Linux kernel lays out /sys,
// symlinks included, for the IB, topology and thermal checks' tests.
//
// The trees are generated from specs in this package and committed under
// testdata/<name>/ (the directory standing for "/"). Regenerate them with
//
//	go test ./internal/sysfsfix -update   (or go generate ./internal/sysfsfix)
//
// Each test starts from a healthy copy (Tree) and injects one fault with
// Set, Remove or RemoveHCA.
package sysfsfix

//go:generate go test -run TestCommittedTreesMatchGenerator -update .

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Tree names.
const (
	// H100NDR is a DGX H100: 8 H100 SXM5, 8 ConnectX-7 NDR IB HCAs
	// (mlx5_0..7, each on its GPU's PCIe switch), an Ethernet CX-7 mlx5_8,
	// 4 NVSwitches, Intel coretemp.
	H100NDR = "h100-ndr"
	// A100HDR is a DGX A100: 8 A100 SXM4, 8 ConnectX-6 HDR IB HCAs,
	// 6 NVSwitches, AMD k10temp.
	A100HDR = "a100-hdr"
	// RoCE is a PCIe server: 4 H100 PCIe, 4 ConnectX-6 Dx RoCE ports, no
	// NVSwitch, Intel coretemp.
	RoCE = "roce"
	// B200 is an HGX B200 (NVLink5): 8 B200 SXM, 8 ConnectX-7 NDR IB HCAs
	// (mlx5_0..7, each on its GPU's PCIe switch) and 4 ConnectX-7
	// NVSwitch management functions (mlx5_8..11, VPD SMDL=SW_MNG); no
	// NVSwitch on the PCI bus, Intel coretemp.
	B200 = "b200"
)

// known lists the tree names for error messages.
const known = H100NDR + ", " + A100HDR + ", " + RoCE + ", " + B200

// Tree copies the named committed tree into a scratch directory (symlinks
// preserved) and returns that root (the dir holding sys/ and proc/).
func Tree(t testing.TB, name string) string {
	t.Helper()
	if _, ok := specs()[name]; !ok {
		t.Fatalf("sysfsfix: unknown tree %q (have %s)", name, known)
	}
	root := scratch(t)
	src := filepath.Join(testdataDir(), name)
	if _, err := os.Stat(src); err != nil {
		// Built with -trimpath or run away from the source: the
		// generator makes the same tree.
		if err := Write(root, name); err != nil {
			t.Fatalf("sysfsfix: %v", err)
		}
		return root
	}
	if err := CopyTree(src, root); err != nil {
		t.Fatalf("sysfsfix: copy %s: %v", name, err)
	}
	return root
}

// scratch is an empty directory removed when the test ends. A tree is
// thousands of small files, and on a slow disk (about 1 ms per file on the
// CI machine) copying one per table case costs seconds; tmpfs makes it
// milliseconds, so /dev/shm is used where it exists.
func scratch(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "gpuhc-sysfsfix-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// testdataDir is this package's testdata, wherever the calling test's
// package is (go test runs each package in its own directory).
func testdataDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "testdata"
	}
	return filepath.Join(filepath.Dir(file), "testdata")
}

// CopyTree copies the tree at src into dst, links kept as links (the
// kernel's layout: class entries are relative links into devices/).
func CopyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, out)
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(out, b, 0o644)
		}
	})
}

// Set overwrites the file root/rel with value+"\n" (the file must already
// exist, like a sysfs attribute; t.Fatal otherwise).
func Set(t testing.TB, root, rel, value string) {
	t.Helper()
	p := filepath.Join(root, rel)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatalf("sysfsfix.Set: %v", err)
	}
	if !fi.Mode().IsRegular() {
		t.Fatalf("sysfsfix.Set: %s is not a file", rel)
	}
	if err := os.WriteFile(p, []byte(value+"\n"), 0o644); err != nil {
		t.Fatalf("sysfsfix.Set: %v", err)
	}
}

// UnlistPorts makes an HCA's ports directory unlistable: a file in its
// place, since as root no mode stops the read.
func UnlistPorts(t testing.TB, root, hca string) {
	t.Helper()
	rel := "sys/class/infiniband/" + hca + "/ports"
	Remove(t, root, rel)
	if err := os.WriteFile(filepath.Join(root, rel), []byte("not a directory\n"), 0o644); err != nil {
		t.Fatalf("sysfsfix.UnlistPorts: %v", err)
	}
}

// Remove deletes root/rel (file, dir tree or symlink). A path that is not
// there is a mistake in the test, so it fails the test.
func Remove(t testing.TB, root, rel string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if _, err := os.Lstat(p); err != nil {
		t.Fatalf("sysfsfix.Remove: %v", err)
	}
	if err := os.RemoveAll(p); err != nil {
		t.Fatalf("sysfsfix.Remove: %v", err)
	}
}

// PortDir is the port directory as reached through the class symlink:
// "sys/class/infiniband/<dev>/ports/<port>" (relative to root).
func PortDir(dev string, port int) string {
	return fmt.Sprintf("sys/class/infiniband/%s/ports/%d", dev, port)
}

// RemoveHCA makes an HCA disappear as when its driver failed to probe:
// removes sys/class/infiniband/<dev> and the device's infiniband/<dev> dir
// (the PCI device stays), with its uverbs device. mlx5_core's netdev and
// hwmon stay, as they do when only the RDMA side (mlx5_ib) fails.
func RemoveHCA(t testing.TB, root, dev string) {
	t.Helper()
	class := filepath.Join(root, "sys/class/infiniband", dev)
	target, err := os.Readlink(class)
	if err != nil {
		t.Fatalf("sysfsfix.RemoveHCA: %v", err)
	}
	ibDir := filepath.Join(filepath.Dir(class), target)
	pciDir := filepath.Dir(filepath.Dir(ibDir))
	for _, p := range []string{ibDir, class} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatalf("sysfsfix.RemoveHCA: %v", err)
		}
	}
	// The kernel drops the class glue directory once it is empty.
	_ = os.Remove(filepath.Dir(ibDir))
	uverbs, _ := filepath.Glob(filepath.Join(pciDir, "infiniband_verbs", "uverbs*"))
	for _, u := range uverbs {
		b, err := os.ReadFile(filepath.Join(u, "ibdev"))
		if err != nil || strings.TrimSpace(string(b)) != dev {
			continue
		}
		for _, p := range []string{u, filepath.Join(root, "sys/class/infiniband_verbs", filepath.Base(u))} {
			if err := os.RemoveAll(p); err != nil {
				t.Fatalf("sysfsfix.RemoveHCA: %v", err)
			}
		}
		_ = os.Remove(filepath.Dir(u))
	}
}

// Write generates the named tree into dir (used by the -update test and
// available for tools such as the e2e and the benchmark). dir must be
// empty or absent.
func Write(dir, name string) error {
	n, ok := specs()[name]
	if !ok {
		return fmt.Errorf("unknown tree %q (have %s)", name, known)
	}
	t, err := build(n)
	if err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	if err := t.write(dir); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
