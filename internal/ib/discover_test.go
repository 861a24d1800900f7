package ib

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

func TestDiscoverTrees(t *testing.T) {
	tests := []struct {
		tree     string
		hcas     int
		first    HCA
		lastName string
		lastPort Port
	}{
		{sysfsfix.H100NDR, 9,
			HCA{Name: "mlx5_0", PCIAddr: "0000:19:00.0", FW: "28.39.2048", Ports: []Port{{Num: 1, State: "ACTIVE", PhysState: "LinkUp",
				RateGbps: 400, RateText: "400 Gb/sec (4X NDR)", LinkLayer: "InfiniBand"}}},
			"mlx5_8", Port{Num: 1, State: "ACTIVE", PhysState: "LinkUp", RateGbps: 100, RateText: "100 Gb/sec (4X EDR)",
				LinkLayer: "Ethernet", Netdevs: []string{"enp193s0np0"}}},
		{sysfsfix.A100HDR, 8,
			HCA{Name: "mlx5_0", PCIAddr: "0000:08:00.0", FW: "20.39.1002", Ports: []Port{{Num: 1, State: "ACTIVE", PhysState: "LinkUp",
				RateGbps: 200, RateText: "200 Gb/sec (4X HDR)", LinkLayer: "InfiniBand"}}},
			"mlx5_7", Port{Num: 1, State: "ACTIVE", PhysState: "LinkUp", RateGbps: 200, RateText: "200 Gb/sec (4X HDR)", LinkLayer: "InfiniBand"}},
		{sysfsfix.RoCE, 4,
			HCA{Name: "mlx5_0", PCIAddr: "0000:1c:00.0", FW: "22.39.1002", Ports: []Port{{Num: 1, State: "ACTIVE", PhysState: "LinkUp",
				RateGbps: 200, RateText: "200 Gb/sec (4X HDR)", LinkLayer: "Ethernet", Netdevs: []string{"ens1np0"}}}},
			"mlx5_3", Port{Num: 1, State: "ACTIVE", PhysState: "LinkUp", RateGbps: 200, RateText: "200 Gb/sec (4X HDR)",
				LinkLayer: "Ethernet", Netdevs: []string{"ens4np0"}}},
	}
	for _, tc := range tests {
		t.Run(tc.tree, func(t *testing.T) {
			hs, err := discover(context.Background(), sysfsfix.Tree(t, tc.tree))
			if err != nil {
				t.Fatal(err)
			}
			if len(hs) != tc.hcas {
				t.Fatalf("got %d HCAs, want %d: %+v", len(hs), tc.hcas, hs)
			}
			if !reflect.DeepEqual(hs[0], tc.first) {
				t.Errorf("first HCA\n got  %+v\n want %+v", hs[0], tc.first)
			}
			last := hs[len(hs)-1]
			if last.Name != tc.lastName || len(last.Ports) != 1 || !reflect.DeepEqual(last.Ports[0], tc.lastPort) {
				t.Errorf("last HCA %+v, want %s with %+v", last, tc.lastName, tc.lastPort)
			}
			for _, h := range hs {
				for _, p := range h.Ports {
					if p.Err != nil {
						t.Errorf("%s/%d: %v", h.Name, p.Num, p.Err)
					}
				}
			}
		})
	}
}

// A garbage or missing attribute leaves its field empty and is named in
// Err; the attributes that could be read are still there to judge.
func TestDiscoverGarbage(t *testing.T) {
	port := sysfsfix.PortDir("mlx5_2", 1)
	tests := []struct {
		name   string
		fault  func(t *testing.T, root string)
		want   Port
		errMsg string
	}{
		{"state garbage", func(t *testing.T, root string) { sysfsfix.Set(t, root, port+"/state", "\x7fELF\x02") },
			Port{Num: 1, PhysState: "LinkUp", RateGbps: 400, RateText: "400 Gb/sec (4X NDR)", LinkLayer: "InfiniBand"}, "not a port state"},
		{"rate negative", func(t *testing.T, root string) { sysfsfix.Set(t, root, port+"/rate", "-400 Gb/sec (4X NDR)") },
			Port{Num: 1, State: "ACTIVE", PhysState: "LinkUp", LinkLayer: "InfiniBand"}, "not a rate"},
		{"rate not a number", func(t *testing.T, root string) { sysfsfix.Set(t, root, port+"/rate", "fast Gb/sec") },
			Port{Num: 1, State: "ACTIVE", PhysState: "LinkUp", LinkLayer: "InfiniBand"}, "not a rate"},
		{"phys_state missing", func(t *testing.T, root string) { sysfsfix.Remove(t, root, port+"/phys_state") },
			Port{Num: 1, State: "ACTIVE", RateGbps: 400, RateText: "400 Gb/sec (4X NDR)", LinkLayer: "InfiniBand"}, "no such file"},
		{"link layer unknown", func(t *testing.T, root string) { sysfsfix.Set(t, root, port+"/link_layer", "Omni-Path") },
			Port{Num: 1, State: "ACTIVE", PhysState: "LinkUp", RateGbps: 400, RateText: "400 Gb/sec (4X NDR)"}, "unknown link layer"},
		{"huge attribute", func(t *testing.T, root string) {
			sysfsfix.Set(t, root, port+"/link_layer", strings.Repeat("x", 1<<20))
		}, Port{Num: 1, State: "ACTIVE", PhysState: "LinkUp", RateGbps: 400, RateText: "400 Gb/sec (4X NDR)"}, "larger than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := sysfsfix.Tree(t, sysfsfix.H100NDR)
			tc.fault(t, root)
			hs, err := discover(context.Background(), root)
			if err != nil {
				t.Fatal(err)
			}
			got := hs[2].Ports[0]
			if got.Err == nil || !strings.Contains(got.Err.Error(), tc.errMsg) {
				t.Errorf("Err = %v, want one containing %q", got.Err, tc.errMsg)
			}
			got.Err = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDiscoverEdges(t *testing.T) {
	t.Run("no infiniband class", func(t *testing.T) {
		hs, err := discover(context.Background(), t.TempDir())
		if hs != nil || err != nil {
			t.Errorf("got %v, %v; want nil, nil", hs, err)
		}
	})
	t.Run("removed HCA", func(t *testing.T) {
		root := sysfsfix.Tree(t, sysfsfix.A100HDR)
		sysfsfix.RemoveHCA(t, root, "mlx5_3")
		names := strings.Join(hcaNames(t, root), " ")
		if names != "mlx5_0 mlx5_1 mlx5_2 mlx5_4 mlx5_5 mlx5_6 mlx5_7" {
			t.Errorf("got %s", names)
		}
	})
	t.Run("non-numeric port entry ignored", func(t *testing.T) {
		root := sysfsfix.Tree(t, sysfsfix.RoCE)
		writeFile(t, root, sysfsfix.PortDir("mlx5_1", 1)+"/../README", "x")
		hs, err := discover(context.Background(), root)
		if err != nil || len(hs[1].Ports) != 1 {
			t.Errorf("got %+v, %v", hs[1], err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		if _, err := discover(cancelled(), sysfsfix.Tree(t, sysfsfix.RoCE)); err == nil {
			t.Error("no error with a cancelled context")
		}
	})
	t.Run("unreadable class dir", func(t *testing.T) {
		root := t.TempDir()
		writeFile(t, root, classDir, "not a directory")
		if _, err := discover(context.Background(), root); err == nil {
			t.Error("no error for a class path that is a file")
		}
	})
}

func TestExcluded(t *testing.T) {
	tests := []struct {
		exclude []string
		dev     string
		port    int
		want    bool
	}{
		{nil, "mlx5_8", 1, false},
		{[]string{"mlx5_8"}, "mlx5_8", 0, true},
		{[]string{"mlx5_8"}, "mlx5_8", 1, true},
		{[]string{"mlx5_8"}, "mlx5_80", 1, false},
		{[]string{"mlx5_8/1"}, "mlx5_8", 1, true},
		{[]string{"mlx5_8/1"}, "mlx5_8", 2, false},
		{[]string{"mlx5_8/1"}, "mlx5_8", 0, false}, // the device itself still counts
		{[]string{"mlx5_*"}, "mlx5_3", 1, true},
		{[]string{"mlx5_*"}, "bnxt_re0", 1, false},
		{[]string{"*/2"}, "mlx5_0", 2, true},
		{[]string{"*/2"}, "mlx5_0", 1, false},
		{[]string{"[", "mlx5_1"}, "mlx5_1", 1, true}, // a bad glob matches nothing
	}
	for _, tc := range tests {
		if got := Excluded(tc.exclude, tc.dev, tc.port); got != tc.want {
			t.Errorf("Excluded(%q, %s, %d) = %v, want %v", tc.exclude, tc.dev, tc.port, got, tc.want)
		}
	}
}

// Keep the fixture layout honest about what Discover relies on: class
// entries are symlinks, as rdmamap's device list requires.
func TestFixtureClassEntriesAreLinks(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.H100NDR)
	ents, err := os.ReadDir(filepath.Join(root, classDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Type()&os.ModeSymlink == 0 {
			t.Errorf("%s is not a symlink", e.Name())
		}
	}
}
