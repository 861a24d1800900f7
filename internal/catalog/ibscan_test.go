package catalog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/ib"
	"github.com/gpuhc/gpuhc/internal/pcibus"
	"github.com/gpuhc/gpuhc/internal/statefile"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// rdmaConsumers are the checks that judge the RDMA devices.
var rdmaConsumers = []string{"ib.port", "ib.counters", "ib.gdr", "fabric.manager", "topology"}

// b200Run is Tasks' RDMA consumers on the HGX B200 tree (8 HCAs, 4
// NVSwitch management functions, no NVSwitch on the PCI bus), without
// GPUs: topology and ib.gdr find them on the bus.
func b200Run(t *testing.T, env Env) (config.Config, []check.Task) {
	t.Helper()
	cfg := config.Default()
	cfg.Root = sysfsfix.Tree(t, sysfsfix.B200)
	env.State = statefile.Dir{Path: t.TempDir()}
	var tasks []check.Task
	for _, task := range Tasks(cfg, env) {
		if slices.Contains(rdmaConsumers, task.Check.Name()) {
			tasks = append(tasks, task)
		}
	}
	if len(tasks) != len(rdmaConsumers) {
		t.Fatalf("%d of the %d RDMA consumers enabled by default", len(tasks), len(rdmaConsumers))
	}
	return cfg, tasks
}

func byCheck(timed []check.Timed) map[string][]check.Result {
	out := map[string][]check.Result{}
	for _, tm := range timed {
		out[tm.Name] = tm.Results
	}
	return out
}

// hostMessage is the message of a check's result about the host.
func hostMessage(rs []check.Result) string {
	for _, r := range rs {
		if r.Component == "host" {
			return fmt.Sprintf("%v %s", r.Status, r.Message)
		}
	}
	return ""
}

// countScans runs b200Run's checks at once on the Env that withScan
// builds (its scan counting into scans, under root), and fails the test
// unless the run scanned exactly once.
func countScans(t *testing.T, withScan func(root *string, scans *atomic.Int32) Env) map[string][]check.Result {
	t.Helper()
	var scans atomic.Int32
	var root string
	cfg, tasks := b200Run(t, withScan(&root, &scans))
	root = cfg.Root
	got := byCheck(check.Run(context.Background(), tasks))
	if n := scans.Load(); n != 1 {
		t.Errorf("%d scans in one run, want 1", n)
	}
	return got
}

// One run, every RDMA consumer running at once as the runner runs them:
// the RDMA devices are scanned once (each VPD read once), and each
// consumer judged what that scan found.
func TestRDMAScannedOncePerRun(t *testing.T) {
	got := countScans(t, func(root *string, scans *atomic.Int32) Env {
		return Env{IB: ib.GatherWith(func(ctx context.Context) (ib.Devices, error) {
			scans.Add(1)
			return ib.Scan(ctx, *root)
		})}
	})
	for name, want := range map[string]string{
		"ib.port":        "8 HCAs, 8 of 8 ports active (4 NVSwitch management devices, not HCAs)",
		"ib.gdr":         "8 GPUs, 8 HCAs",
		"fabric.manager": "NVLink5",
	} {
		if msg := hostMessage(got[name]); !strings.Contains(msg, want) {
			t.Errorf("%s: %q, want %q", name, msg, want)
		}
	}
	if n := len(got["topology"]); n != 8 {
		t.Errorf("topology: %d results, want one per GPU: %+v", n, got["topology"])
	}
}

// The PCI bus too is scanned once a run, by whichever of ib.gdr, topology
// and fabric.manager asks first (they find the GPUs and NVSwitches on it).
func TestPCIBusScannedOncePerRun(t *testing.T) {
	got := countScans(t, func(root *string, scans *atomic.Int32) Env {
		return Env{PCI: pcibus.GatherWith(func(ctx context.Context) (pcibus.Bus, error) {
			scans.Add(1)
			return pcibus.Scan(ctx, *root)
		})}
	})
	if msg := hostMessage(got["ib.gdr"]); !strings.Contains(msg, "8 GPUs, 8 HCAs") {
		t.Errorf("ib.gdr: %q", msg)
	}
	if n := len(got["topology"]); n != 8 {
		t.Errorf("topology: %d results, want one per GPU on the bus", n)
	}
}

// A scan error is the run's answer: every consumer reports it as its
// ERROR (never a SKIP, never a FAIL), from the one scan.
func TestRDMAScanErrorReachesEveryConsumer(t *testing.T) {
	var scans atomic.Int32
	env := Env{IB: ib.GatherWith(func(context.Context) (ib.Devices, error) {
		scans.Add(1)
		return ib.Devices{}, errors.New("read sys/class/infiniband: input/output error")
	})}
	_, tasks := b200Run(t, env)
	for name, rs := range byCheck(check.Run(context.Background(), tasks)) {
		if len(rs) != 1 || rs[0].Status != check.Error || !strings.Contains(rs[0].Message, "input/output error") {
			t.Errorf("%s: %+v, want one ERROR naming the scan's error", name, rs)
		}
	}
	if n := scans.Load(); n != 1 {
		t.Errorf("%d scans, want 1", n)
	}
}

// Without env.IB, Tasks gathers one scan for its checks: once ib.port
// has run, the others judge what it saw even after the RDMA class is
// gone from the tree, which a second scan would notice.
func TestTasksShareTheirOwnScan(t *testing.T) {
	cfg, tasks := b200Run(t, Env{})
	first := slices.IndexFunc(tasks, func(t check.Task) bool { return t.Check.Name() == "ib.port" })
	if rs := tasks[first].Check.Run(context.Background()); !strings.Contains(hostMessage(rs), "8 HCAs") {
		t.Fatalf("ib.port: %+v", rs)
	}
	if err := os.RemoveAll(filepath.Join(cfg.Root, "sys/class/infiniband")); err != nil {
		t.Fatal(err)
	}
	rest := slices.Delete(slices.Clone(tasks), first, first+1)
	got := byCheck(check.Run(context.Background(), rest))
	if msg := hostMessage(got["ib.gdr"]); !strings.Contains(msg, "8 GPUs, 8 HCAs") {
		t.Errorf("ib.gdr: %q", msg)
	}
	if msg := hostMessage(got["fabric.manager"]); !strings.Contains(msg, "NVLink5") {
		t.Errorf("fabric.manager: %q", msg)
	}
	// The control: a new run's scan sees the class gone.
	for _, task := range Tasks(cfg, Env{State: statefile.Dir{Path: t.TempDir()}}) {
		if task.Check.Name() == "ib.port" {
			if msg := hostMessage(task.Check.Run(context.Background())); !strings.Contains(msg, "no RDMA devices") {
				t.Errorf("ib.port of a new run: %q", msg)
			}
		}
	}
}
