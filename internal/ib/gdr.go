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
)

// peermem is the module that lets RDMA devices reach GPU memory.
const peermem = "nvidia_peermem"

type gdrCheck struct {
	root string
	cfg  config.IB
	gpus func(context.Context) (int, error)
}

// NewGDR checks that nvidia_peermem is loaded (or built in) where GPUs and
// RDMA devices are both present. gpus counts the node's GPUs (the NVML
// inventory, or a simulated node's); nil counts NVIDIA GPUs on the PCI bus
// under root.
func NewGDR(root string, c config.IB, gpus func(context.Context) (int, error)) check.Check {
	return &gdrCheck{root: root, cfg: c, gpus: gpus}
}

func (c *gdrCheck) Name() string { return nameGDR }

func (c *gdrCheck) Run(ctx context.Context) []check.Result {
	r := c.judge(ctx)
	return []check.Result{r}
}

func (c *gdrCheck) judge(ctx context.Context) check.Result {
	all, err := Discover(ctx, c.root)
	switch {
	case ctx.Err() != nil:
		return interrupted(ctx, nameGDR)
	case err != nil:
		return result(nameGDR, componentHost, check.Error, "cannot list RDMA devices: %s", errText(err))
	}
	hcas := included(all, c.cfg.Exclude)
	if len(hcas) == 0 {
		return result(nameGDR, componentHost, check.Skip, "no RDMA devices%s", excludedNote(len(all)))
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
	loaded, err := c.peermemLoaded()
	switch {
	case loaded:
		return result(nameGDR, componentHost, check.OK, "%s loaded (%d GPUs, %d HCAs)", peermem, n, len(hcas))
	case err != nil:
		return result(nameGDR, componentHost, check.Error, "cannot tell if %s is loaded: %s", peermem, errText(err))
	}
	return result(nameGDR, componentHost, check.Fail, "%s not loaded (GPUDirect RDMA off)", peermem)
}

func (c *gdrCheck) countGPUs(ctx context.Context) (int, error) {
	if c.gpus != nil {
		return c.gpus(ctx)
	}
	bus, err := gpu.NVIDIAOnBus(c.root)
	return len(bus), err
}

// peermemLoaded looks in /proc/modules, then in /sys/module, where built-in
// modules with parameters show too. An unreadable /proc/modules without
// the /sys/module entry cannot tell "not loaded" from "not listed": that
// is an error, not a FAIL.
func (c *gdrCheck) peermemLoaded() (bool, error) {
	if _, err := os.Stat(filepath.Join(c.root, "sys/module", peermem)); err == nil {
		return true, nil
	}
	p := filepath.Join(c.root, "proc/modules")
	b, err := readFile(p, maxProc)
	if err != nil {
		return false, err
	}
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 {
			return false, fmt.Errorf("%s line %d: not a module line: %s", p, i+1, quoteShort(line))
		}
		if strings.ReplaceAll(f[0], "-", "_") == peermem {
			return true, nil
		}
	}
	return false, nil
}
