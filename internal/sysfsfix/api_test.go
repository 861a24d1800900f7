package sysfsfix

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func read(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(root, rel string) bool {
	_, err := os.Lstat(filepath.Join(root, rel))
	return err == nil
}

// TestTreeCopiesCommittedTree: Tree's copy equals the committed tree, links
// kept as links, and is writable.
func TestTreeCopiesCommittedTree(t *testing.T) {
	t.Parallel()
	for _, name := range allTrees {
		root := Tree(t, name)
		want, got := snapshot(t, filepath.Join("testdata", name)), snapshot(t, root)
		if len(got) != len(want) {
			t.Errorf("%s: copy has %d entries, testdata %d", name, len(got), len(want))
		}
		for p, w := range want {
			if got[p] != w {
				t.Errorf("%s: %s differs in the copy", name, p)
			}
		}
	}
}

// TestLinksResolveInsideTree: every symlink in every tree resolves, and to
// a path inside the tree (a fixture must never reach the real /sys).
func TestLinksResolveInsideTree(t *testing.T) {
	t.Parallel()
	for _, name := range allTrees {
		root := filepath.Join("testdata", name)
		abs, err := filepath.Abs(root)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.Type()&fs.ModeSymlink == 0 {
				return err
			}
			n++
			target, _ := os.Readlink(p)
			if filepath.IsAbs(target) {
				t.Errorf("%s: %s -> %s is absolute", name, p, target)
				return nil
			}
			resolved := filepath.Clean(filepath.Join(filepath.Dir(p), target))
			ra, _ := filepath.Abs(resolved)
			if !strings.HasPrefix(ra, abs+string(filepath.Separator)) {
				t.Errorf("%s: %s -> %s leaves the tree", name, p, target)
			}
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s: %s -> %s dangles: %v", name, p, target, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n < 50 {
			t.Errorf("%s: only %d symlinks", name, n)
		}
	}
}

// TestKernelLayout pins the facts the checks' discovery relies on.
func TestKernelLayout(t *testing.T) {
	t.Parallel()
	type hcaWant struct {
		dev, pci, gpu, rate, layer, netdev, vendorDev, fw string
		numa                                              string
	}
	cases := map[string][]hcaWant{
		H100NDR: {
			{"mlx5_0", "0000:19:00.0", "0000:18:00.0", rateNDR, "InfiniBand", "ibp25s0", "0x1021", "28.39.2048", "0"},
			{"mlx5_4", "0000:9b:00.0", "0000:9a:00.0", rateNDR, "InfiniBand", "ibp155s0", "0x1021", "28.39.2048", "1"},
			{"mlx5_7", "0000:dc:00.0", "0000:db:00.0", rateNDR, "InfiniBand", "ibp220s0", "0x1021", "28.39.2048", "1"},
			{"mlx5_8", "0000:c1:00.0", "", rateEDR, "Ethernet", "enp193s0np0", "0x1021", "28.39.2048", "1"},
		},
		A100HDR: {
			{"mlx5_0", "0000:08:00.0", "0000:07:00.0", rateHDR, "InfiniBand", "ibp8s0", "0x101b", "20.39.1002", "0"},
			{"mlx5_7", "0000:be:00.0", "0000:bd:00.0", rateHDR, "InfiniBand", "ibp190s0", "0x101b", "20.39.1002", "1"},
		},
		RoCE: {
			{"mlx5_0", "0000:1c:00.0", "0000:1b:00.0", rateHDR, "Ethernet", "ens1np0", "0x101d", "22.39.1002", "0"},
			{"mlx5_3", "0000:be:00.0", "0000:bd:00.0", rateHDR, "Ethernet", "ens4np0", "0x101d", "22.39.1002", "1"},
		},
	}
	for name, hcas := range cases {
		root := filepath.Join("testdata", name)
		// rdmamap's GetRdmaDeviceList skips directories: class entries
		// must be symlinks.
		ents, err := os.ReadDir(filepath.Join(root, "sys/class/infiniband"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Type()&fs.ModeSymlink == 0 {
				t.Errorf("%s: class/infiniband/%s is not a symlink", name, e.Name())
			}
		}
		for _, h := range hcas {
			port := PortDir(h.dev, 1)
			for rel, want := range map[string]string{
				port + "/state":                                                        "4: ACTIVE\n",
				port + "/phys_state":                                                   "5: LinkUp\n",
				port + "/rate":                                                         h.rate + "\n",
				port + "/link_layer":                                                   h.layer + "\n",
				port + "/counters/symbol_error":                                        "0\n",
				"sys/class/infiniband/" + h.dev + "/fw_ver":                            h.fw + "\n",
				"sys/class/infiniband/" + h.dev + "/node_type":                         "1: CA\n",
				"sys/class/infiniband/" + h.dev + "/device/vendor":                     "0x15b3\n",
				"sys/class/infiniband/" + h.dev + "/device/device":                     h.vendorDev + "\n",
				"sys/class/infiniband/" + h.dev + "/device/numa_node":                  h.numa + "\n",
				"sys/bus/pci/devices/" + h.pci + "/infiniband/" + h.dev + "/node_type": "1: CA\n",
				"sys/class/net/" + h.netdev + "/operstate":                             "up\n",
				"sys/class/net/" + h.netdev + "/device/vendor":                         "0x15b3\n",
			} {
				if got := read(t, root, rel); got != want {
					t.Errorf("%s: %s = %q, want %q", name, rel, got, want)
				}
			}
			typ := map[string]string{"InfiniBand": "32\n", "Ethernet": "1\n"}[h.layer]
			if got := read(t, root, "sys/class/net/"+h.netdev+"/type"); got != typ {
				t.Errorf("%s: %s type %q, want %q", name, h.netdev, got, typ)
			}
			ndev := read(t, root, port+"/gid_attrs/ndevs/0")
			if h.layer == "Ethernet" && ndev != h.netdev+"\n" {
				t.Errorf("%s: %s ndevs/0 = %q, want the netdev", name, h.dev, ndev)
			}
			if h.layer == "InfiniBand" && ndev != "" {
				t.Errorf("%s: IB port %s ndevs/0 = %q, want empty", name, h.dev, ndev)
			}
			// The HCA and its GPU share the PCIe switch: same upstream port.
			hcaPath, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices", h.pci))
			if err != nil {
				t.Fatal(err)
			}
			if h.gpu == "" {
				continue
			}
			gpuPath, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices", h.gpu))
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Dir(filepath.Dir(hcaPath)) != filepath.Dir(filepath.Dir(gpuPath)) {
				t.Errorf("%s: %s (%s) and GPU %s are not under one switch upstream port", name, h.dev, hcaPath, gpuPath)
			}
			if got := read(t, root, "sys/bus/pci/devices/"+h.gpu+"/numa_node"); got != h.numa+"\n" {
				t.Errorf("%s: GPU %s numa %q, want %s", name, h.gpu, got, h.numa)
			}
		}
	}
}

// TestGPUsMatchSim: the GPU buses must be the simulator's (internal/gpu/sim
// dgxh100 and dgxa100) so --simulate lines up with the fixtures.
func TestGPUsMatchSim(t *testing.T) {
	t.Parallel()
	cases := []struct {
		tree, device string
		buses        []string
		nvswitches   int
	}{
		{H100NDR, "0x2330", []string{"18", "2a", "3a", "5d", "9a", "ab", "ba", "db"}, 4},
		{A100HDR, "0x20b0", []string{"07", "0f", "47", "4e", "87", "90", "b7", "bd"}, 6},
		{RoCE, "0x2331", []string{"1b", "3d", "9b", "bd"}, 0},
	}
	for _, c := range cases {
		root := filepath.Join("testdata", c.tree)
		ents, err := os.ReadDir(filepath.Join(root, "sys/bus/pci/devices"))
		if err != nil {
			t.Fatal(err)
		}
		var gpus []string
		nvsw := 0
		for _, e := range ents {
			d := "sys/bus/pci/devices/" + e.Name() + "/"
			if read(t, root, d+"vendor") != "0x10de\n" {
				continue
			}
			switch read(t, root, d+"class") {
			case "0x030200\n":
				gpus = append(gpus, e.Name()[5:7])
				if got := read(t, root, d+"device"); got != c.device+"\n" {
					t.Errorf("%s: GPU %s device %q", c.tree, e.Name(), got)
				}
			case "0x068000\n":
				nvsw++
			}
		}
		if strings.Join(gpus, ",") != strings.Join(c.buses, ",") {
			t.Errorf("%s: GPU buses %v, want %v", c.tree, gpus, c.buses)
		}
		if nvsw != c.nvswitches {
			t.Errorf("%s: %d NVSwitches, want %d", c.tree, nvsw, c.nvswitches)
		}
		if !strings.Contains(read(t, root, "proc/modules"), "\nnvidia_peermem ") {
			t.Errorf("%s: nvidia_peermem not in proc/modules", c.tree)
		}
	}
}

func TestSet(t *testing.T) {
	t.Parallel()
	root := Tree(t, H100NDR)
	rel := PortDir("mlx5_3", 1) + "/state"
	Set(t, root, rel, "1: DOWN")
	if got := read(t, root, rel); got != "1: DOWN\n" {
		t.Errorf("after Set: %q", got)
	}
	// Through the class symlink: the real file changed, the link stayed.
	fi, err := os.Lstat(filepath.Join(root, "sys/class/infiniband/mlx5_3"))
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("class entry no longer a symlink: %v %v", fi, err)
	}
	// Other HCAs untouched.
	if got := read(t, root, PortDir("mlx5_2", 1)+"/state"); got != "4: ACTIVE\n" {
		t.Errorf("mlx5_2 state %q", got)
	}
}

func TestSetMissingFails(t *testing.T) {
	t.Parallel()
	root := Tree(t, RoCE)
	for _, rel := range []string{PortDir("mlx5_9", 1) + "/state", PortDir("mlx5_0", 1) + "/counters"} {
		ft := &fatalRecorder{TB: t}
		func() {
			defer func() { _ = recover() }()
			Set(ft, root, rel, "x")
		}()
		if !ft.fatal {
			t.Errorf("Set(%s) did not fail the test", rel)
		}
	}
	if exists(root, PortDir("mlx5_9", 1)) {
		t.Error("Set created a file")
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	root := Tree(t, H100NDR)
	Remove(t, root, PortDir("mlx5_1", 1)+"/counters/symbol_error")
	if exists(root, PortDir("mlx5_1", 1)+"/counters/symbol_error") {
		t.Error("file still there")
	}
	Remove(t, root, PortDir("mlx5_2", 1)+"/counters")
	if exists(root, PortDir("mlx5_2", 1)+"/counters") || !exists(root, PortDir("mlx5_2", 1)+"/state") {
		t.Error("counters dir not removed, or more removed")
	}
	Remove(t, root, "sys/class/net/ibp25s0")
	if exists(root, "sys/class/net/ibp25s0") || !exists(root, "sys/bus/pci/devices/0000:19:00.0/net/ibp25s0/operstate") {
		t.Error("removing a link must remove the link only")
	}
	ft := &fatalRecorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		Remove(ft, root, "sys/class/infiniband/mlx5_42")
	}()
	if !ft.fatal {
		t.Error("Remove of a missing path did not fail the test")
	}
}

func TestRemoveHCA(t *testing.T) {
	t.Parallel()
	root := Tree(t, H100NDR)
	RemoveHCA(t, root, "mlx5_5")
	pci := "sys/bus/pci/devices/0000:ac:00.0"
	if exists(root, "sys/class/infiniband/mlx5_5") || exists(root, pci+"/infiniband") {
		t.Error("mlx5_5 still visible")
	}
	if exists(root, "sys/class/infiniband_verbs/uverbs5") || exists(root, pci+"/infiniband_verbs") {
		t.Error("uverbs5 still visible")
	}
	if read(t, root, pci+"/vendor") != "0x15b3\n" {
		t.Error("the PCI device must stay")
	}
	ents, err := os.ReadDir(filepath.Join(root, "sys/class/infiniband"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 8 {
		t.Errorf("%d HCAs left, want 8", len(ents))
	}
	if !exists(root, "sys/class/infiniband_verbs/uverbs4") {
		t.Error("another HCA's uverbs went too")
	}
}

// fatalRecorder notes Fatal instead of ending the test, so a test can
// assert that a helper refuses bad input.
type fatalRecorder struct {
	testing.TB
	fatal bool
}

var errFatal = errors.New("fatal")

func (f *fatalRecorder) Fatalf(string, ...any) { f.fatal = true; panic(errFatal) }
func (f *fatalRecorder) Fatal(...any)          { f.fatal = true; panic(errFatal) }
func (f *fatalRecorder) Helper()               {}

func TestTreeUnknownNameFails(t *testing.T) {
	t.Parallel()
	ft := &fatalRecorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		Tree(ft, "dgx-z900")
	}()
	if !ft.fatal {
		t.Error("Tree(unknown) did not fail the test")
	}
}
