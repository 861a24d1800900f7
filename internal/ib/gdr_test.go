package ib

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

func TestGDR(t *testing.T) {
	gpus := func(n int, err error) func(context.Context) (int, error) {
		return func(context.Context) (int, error) { return n, err }
	}
	withoutPeermem := "nvidia 56700928 2 nvidia_uvm,nvidia_modeset, Live 0xffffffffbf6a0000 (POE)\n" +
		"mlx5_ib 487424 0 - Live 0xffffffffc0a7d000\n"
	tests := []struct {
		name  string
		tree  string // "" for a node without RDMA devices or GPUs
		gpus  func(context.Context) (int, error)
		fault func(t *testing.T, root string)
		want  want
	}{
		{"h100 healthy, GPUs from the PCI bus", sysfsfix.H100NDR, nil, nil, want{check.OK, "nvidia_peermem loaded (8 GPUs, 9 HCAs)"}},
		{"a100 healthy", sysfsfix.A100HDR, nil, nil, want{check.OK, "nvidia_peermem loaded (8 GPUs, 8 HCAs)"}},
		{"roce healthy", sysfsfix.RoCE, nil, nil, want{check.OK, "nvidia_peermem loaded (4 GPUs, 4 HCAs)"}},
		{"GPUs from the inventory", sysfsfix.RoCE, gpus(2, nil), nil, want{check.OK, "(2 GPUs, 4 HCAs)"}},
		{"nvidia_peermem missing", sysfsfix.H100NDR, nil, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, "proc/modules", withoutPeermem)
			sysfsfix.Remove(t, root, "sys/module/nvidia_peermem")
		}, want{check.Fail, "nvidia_peermem not loaded, nor nv_peer_mem (GPUDirect RDMA off)"}},
		{"nvidia_peermem built in", sysfsfix.H100NDR, nil, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, "proc/modules", withoutPeermem)
			sysfsfix.Remove(t, root, "sys/module/nvidia_peermem")
			writeFile(t, root, "sys/module/nvidia_peermem/parameters/peerdirect_support", "0\n")
		}, want{check.OK, "nvidia_peermem loaded"}},
		{"no GPUs on the bus", sysfsfix.RoCE, gpus(0, nil), nil, want{check.Skip, "no GPUs"}},
		{"no HCAs", "", gpus(8, nil), nil, want{check.Skip, "no RDMA devices"}},
		{"every HCA gone", sysfsfix.RoCE, nil, func(t *testing.T, root string) {
			sysfsfix.RemoveHCA(t, root, "mlx5_0")
			sysfsfix.RemoveHCA(t, root, "mlx5_1")
			sysfsfix.RemoveHCA(t, root, "mlx5_2")
			sysfsfix.RemoveHCA(t, root, "mlx5_3")
		}, want{check.Skip, "no RDMA devices"}},
		{"GPU count fails", sysfsfix.RoCE, gpus(0, errors.New("NVML did not answer in 5s")), nil,
			want{check.Error, "cannot count GPUs: NVML did not answer in 5s"}},
		{"negative GPU count", sysfsfix.RoCE, gpus(-1, nil), nil, want{check.Error, "cannot count GPUs"}},
		{"no /proc/modules, loaded module in /sys/module", sysfsfix.RoCE, nil, func(t *testing.T, root string) {
			sysfsfix.Remove(t, root, "proc/modules")
		}, want{check.OK, "nvidia_peermem loaded"}},
		{"unreadable /proc/modules is an error, not a drain", sysfsfix.RoCE, nil, func(t *testing.T, root string) {
			sysfsfix.Remove(t, root, "proc/modules")
			sysfsfix.Remove(t, root, "sys/module/nvidia_peermem")
		}, want{check.Error, "cannot tell if nvidia_peermem or nv_peer_mem is loaded"}},
		{"garbage /proc/modules is an error, not a drain", sysfsfix.RoCE, nil, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, "proc/modules", "\x7fELF\x02\x01")
			sysfsfix.Remove(t, root, "sys/module/nvidia_peermem")
		}, want{check.Error, "not a module line"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			if tc.tree != "" {
				root = sysfsfix.Tree(t, tc.tree)
			}
			if tc.fault != nil {
				tc.fault(t, root)
			}
			expect(t, nameGDR, run(t, NewGDR(root, NewGather(root), defaults(), tc.gpus)), map[string]want{"host": tc.want})
		})
	}
}

// MLNX_OFED's nvidia-peer-memory package loads nv_peer_mem, which gives the
// same GPUDirect RDMA as the driver's nvidia_peermem (its drop-in
// replacement); checks.ib.gdr.modules says which are accepted.
func TestGDRModules(t *testing.T) {
	withLegacy := "nv_peer_mem 16384 0 - Live 0xffffffffc2c9f000 (OE)\n" +
		"nvidia 56700928 2 nvidia_uvm,nv_peer_mem, Live 0xffffffffbf6a0000 (POE)\n"
	legacyInProc := func(t *testing.T, root string) {
		sysfsfix.Set(t, root, "proc/modules", withLegacy)
		sysfsfix.Remove(t, root, "sys/module/nvidia_peermem")
	}
	tests := []struct {
		name    string
		modules []string // nil: the default
		fault   func(t *testing.T, root string)
		want    want
	}{
		{"nv_peer_mem in /proc/modules", nil, legacyInProc, want{check.OK, "nv_peer_mem loaded (8 GPUs, 9 HCAs)"}},
		{"nv_peer_mem in /sys/module", nil, func(t *testing.T, root string) {
			legacyInProc(t, root)
			sysfsfix.Remove(t, root, "proc/modules")
			writeFile(t, root, "sys/module/nv_peer_mem/refcnt", "0\n")
		}, want{check.OK, "nv_peer_mem loaded"}},
		{"both loaded: the first named is reported", nil, func(t *testing.T, root string) {
			writeFile(t, root, "sys/module/nv_peer_mem/refcnt", "0\n")
		}, want{check.OK, "nvidia_peermem loaded"}},
		{"only nvidia_peermem accepted", []string{"nvidia_peermem"}, legacyInProc,
			want{check.Fail, "nvidia_peermem not loaded (GPUDirect RDMA off)"}},
		{"a name written with dashes", []string{"nv-peer-mem"}, legacyInProc, want{check.OK, "nv-peer-mem loaded"}},
		{"a garbled line does not hide a listed module", nil, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, "proc/modules", "\x7fELF\n"+withLegacy)
			sysfsfix.Remove(t, root, "sys/module/nvidia_peermem")
		}, want{check.OK, "nv_peer_mem loaded"}},
		{"no module named", []string{}, nil, want{check.Error, "no module named in checks.ib.gdr.modules"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := sysfsfix.Tree(t, sysfsfix.H100NDR)
			if tc.fault != nil {
				tc.fault(t, root)
			}
			c := defaults()
			if tc.modules != nil {
				c.GDR.Modules = tc.modules
			}
			expect(t, nameGDR, run(t, NewGDR(root, NewGather(root), c, nil)), map[string]want{"host": tc.want})
		})
	}
}

func TestGDRExcluded(t *testing.T) {
	c := defaults()
	c.Exclude = []string{"mlx5_*"}
	root := sysfsfix.Tree(t, sysfsfix.RoCE)
	rs := run(t, NewGDR(root, NewGather(root), c, nil))
	expect(t, nameGDR, rs, map[string]want{"host": {check.Skip, "no RDMA devices (4 excluded)"}})
}

func TestGDRHonoursContext(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.RoCE)
	rs := NewGDR(root, NewGather(root), defaults(), nil).Run(cancelled())
	expect(t, nameGDR, rs, map[string]want{"host": {check.Error, "interrupted"}})
}
