package ib

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

type gdrCheck struct {
	root string
	devs *Gather
	cfg  config.IB
	gpus func(context.Context) (int, error)
}

// NewGDR checks that a peer-memory module (c.GDR.Modules: nvidia_peermem,
// or the older nv_peer_mem it replaced as a drop-in) is loaded or built in
// where GPUs and RDMA devices are both present. gpus counts the node's GPUs (the NVML
// inventory, or a simulated node's); nil counts NVIDIA GPUs on the PCI bus
// under root. devs is the run's scan of the RDMA devices; root prefixes
// /sys/module, /proc/modules and the PCI bus.
func NewGDR(root string, devs *Gather, c config.IB, gpus func(context.Context) (int, error)) check.Check {
	return &gdrCheck{root: root, devs: devs, cfg: c, gpus: gpus}
}

func (c *gdrCheck) Name() string { return nameGDR }

func (c *gdrCheck) Run(ctx context.Context) []check.Result {
	r := c.judge(ctx)
	return []check.Result{r}
}

func (c *gdrCheck) judge(ctx context.Context) check.Result {
	devs, stop, ok := listHCAs(ctx, c.devs, nameGDR)
	switch {
	case !ok:
		return stop
	case ctx.Err() != nil:
		return interrupted(ctx, nameGDR)
	}
	all := devs.HCAs
	hcas := included(all, c.cfg.Exclude)
	if len(hcas) == 0 {
		return noDevices(nameGDR, len(all), 0)
	}
	n, err := c.countGPUs(ctx)
	switch {
	case ctx.Err() != nil:
		return interrupted(ctx, nameGDR)
	case err != nil:
		return result(nameGDR, componentHost, check.Error, "cannot count GPUs: %s", errText(err))
	case n < 0:
		return result(nameGDR, componentHost, check.Error, "cannot count GPUs: got %d", n)
	case n == 0:
		return result(nameGDR, componentHost, check.Skip, "no GPUs")
	}
	mods := c.cfg.GDR.Modules
	if len(mods) == 0 {
		// Refused by config validation; only a caller building its own
		// configuration gets here.
		return result(nameGDR, componentHost, check.Error, "no module named in checks.ib.gdr.modules")
	}
	found, err := c.loaded(mods)
	switch {
	case found != "":
		return result(nameGDR, componentHost, check.OK, "%s loaded (%d GPUs, %d HCAs)", found, n, len(hcas))
	case err != nil:
		return result(nameGDR, componentHost, check.Error, "cannot tell if %s is loaded: %s", strings.Join(mods, " or "), errText(err))
	case len(mods) == 1:
		return result(nameGDR, componentHost, check.Fail, "%s not loaded (GPUDirect RDMA off)", mods[0])
	}
	return result(nameGDR, componentHost, check.Fail, "%s not loaded, nor %s (GPUDirect RDMA off)", mods[0], strings.Join(mods[1:], " or "))
}

func (c *gdrCheck) countGPUs(ctx context.Context) (int, error) {
	if c.gpus != nil {
		return c.gpus(ctx)
	}
	bus, err := gpu.NVIDIAOnBus(c.root)
	return len(bus), err
}

// loaded returns the first of mods found in /sys/module, where built-in
// modules with parameters show too, or else in /proc/modules; "" when none
// is. An unreadable /proc/modules without a /sys/module entry cannot tell
// "not loaded" from "not listed": that is an error, not a FAIL.
func (c *gdrCheck) loaded(mods []string) (string, error) {
	for _, m := range mods {
		if _, err := os.Stat(filepath.Join(c.root, "sys/module", modName(m))); err == nil {
			return m, nil
		}
	}
	p := filepath.Join(c.root, "proc/modules")
	b, err := sysread.File(p, maxProc)
	if err != nil {
		return "", err
	}
	listed := map[string]bool{}
	var bad error
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case len(f) < 3:
			if bad == nil {
				bad = fmt.Errorf("%s line %d: not a module line: %s", p, i+1, sysread.QuoteShort(line))
			}
		default:
			listed[modName(f[0])] = true
		}
	}
	for _, m := range mods {
		if listed[modName(m)] {
			return m, nil
		}
	}
	// A garbled line might have been the module's.
	return "", bad
}

// modName is a module's name as the kernel keeps it: modprobe takes
// "nv-peer-mem" for "nv_peer_mem".
func modName(s string) string { return strings.ReplaceAll(s, "-", "_") }
