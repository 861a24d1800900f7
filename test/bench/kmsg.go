package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/catalog"
	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// ringSize is the kernel's default log_buf_len on the distributions GPU
// nodes run (CONFIG_LOG_BUF_SHIFT=17 plus per-CPU space on a 100+ CPU
// node comes to about 1 MiB), full.
const ringSize = 1 << 20

// benchKmsg measures what the kernel-log pass and every rule over it
// (catalog.KernelRules: each rule registered there is measured without
// touching this file) add to a run: a full 1 MiB ring, in /dev/kmsg's
// format, read from a captured dump with the cursor at its start (every
// line new: the worst case, a first run after a reboot) and at its end
// (the steady state: the whole ring read, nothing new), the rules judged
// and the cursor committed, on a simulated DGX H100 whose NVML is
// already up (the GPU inventory is shared with the GPU checks, not a
// cost of the pass). It also times one read of this machine's own
// /dev/kmsg, where it can: the device is read one record per read(2),
// which a dump does not show.
func benchKmsg(runs int) error {
	dir, err := os.MkdirTemp("", "gpuhc-bench-kmsg-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	m, err := sim.Build("dgxh100", nil)
	if err != nil {
		return err
	}
	ring, records, xids := buildRing(m)
	path := filepath.Join(dir, "kmsg.dump")
	if err := os.WriteFile(path, []byte(ring), 0o644); err != nil {
		return err
	}
	cfg := config.Default()
	node := gpu.NewNode(m.Server, "", -1, m.Model.Name, gpu.WithBus(m.OnBus))
	if _, err := node.Inventory(context.Background()); err != nil {
		return fmt.Errorf("simulated NVML: %w", err)
	}
	fmt.Printf("kernel ring: %d bytes, %d records (%d XID lines), /dev/kmsg format\n", len(ring), records, xids)
	for _, c := range []struct {
		name string
		next uint64
		// steady: the rules' records stay from run to run, as on a node
		// (nothing new: a rule whose record did not change writes nothing);
		// else every run is a rule's first (every line new: a first run
		// after a reboot, each rule writing its record).
		steady bool
	}{{"every line new", 0, false}, {"nothing new", uint64(records), true}} {
		var took, read, judge, commit []float64
		var rules []string
		state := filepath.Join(dir, "state")
		if err := os.RemoveAll(state); err != nil {
			return err
		}
		for range runs {
			p, names, err := kmsgRun(cfg, node, path, state, c.next, c.steady)
			if err != nil {
				return err
			}
			rules = names
			took = append(took, ms(p.read+p.judge+p.commit))
			read, judge, commit = append(read, ms(p.read)), append(judge, ms(p.judge)), append(commit, ms(p.commit))
		}
		fmt.Printf("kernel-log pass + %d rules (%s), %s: median %.2f ms, max %.2f ms over %d runs (target < 5 ms)\n",
			len(rules), strings.Join(rules, ", "), c.name, median(took), slices.Max(took), runs)
		fmt.Printf("  medians: read and rebuild the lines %.2f ms, rules %.2f ms, commit (fsync) %.2f ms\n", median(read), median(judge), median(commit))
	}
	return deviceRead(runs)
}

// parts are one run's times: the pass's read of the log, the rules
// (which save their own state), and the cursor's commit.
type parts struct{ read, judge, commit time.Duration }

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// kmsgRun is one run's pass: a fresh Log and fresh rules (as each run of
// the binary builds them), the cursor set to next beforehand; the rules'
// records are kept from the run before when steady.
func kmsgRun(cfg config.Config, node *gpu.Node, dump, state string, next uint64, steady bool) (parts, []string, error) {
	var p parts
	if !steady {
		if err := os.RemoveAll(state); err != nil {
			return p, nil, err
		}
	}
	st := statefile.Dir{Path: state}
	src := kmsg.KmsgSource("", dump)
	if err := st.Save(kmsg.CursorFile, map[string]any{"boot_id": src.BootID(), "next_seq": next}); err != nil {
		return p, nil, err
	}
	log := kmsg.NewLog(src, st)
	tasks := catalog.KernelRules(cfg, catalog.Env{GPU: node, Kernel: log, State: st})
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Deadline.Duration)
	defer cancel()
	start := time.Now()
	if snap := log.Snapshot(ctx); snap.Err != nil {
		return p, nil, snap.Err
	}
	p.read = time.Since(start)
	start = time.Now()
	timed := check.Run(ctx, tasks)
	p.judge = time.Since(start)
	start = time.Now()
	saved, err := log.Commit()
	p.commit = time.Since(start)
	if err != nil || !saved {
		return p, nil, fmt.Errorf("cursor not committed (saved %v, pending %v): %v", saved, log.Pending(), err)
	}
	var names []string
	for _, t := range timed {
		names = append(names, t.Name)
		for _, r := range t.Results {
			if r.Status == check.Error {
				return p, nil, fmt.Errorf("%s: %s: %s", t.Name, r.Component, r.Message)
			}
		}
	}
	return p, names, nil
}

// deviceRead times reading this machine's /dev/kmsg to its end.
func deviceRead(runs int) error {
	src := kmsg.KmsgSource("/", "/dev/kmsg")
	var took []float64
	var seen int
	for range runs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		b, err := src.Records(ctx, math.MaxUint64)
		d := time.Since(start)
		cancel()
		if err != nil {
			fmt.Printf("this machine's /dev/kmsg: not read (%v)\n", err)
			return nil
		}
		took, seen = append(took, float64(d)/1e6), b.Seen
	}
	per := 0.0
	if seen > 0 {
		per = median(took) * 1e3 / float64(seen)
	}
	fmt.Printf("this machine's /dev/kmsg: %d records read in %.2f ms median (%.2f µs a record; a full 1 MiB ring of ~%d records: ~%.1f ms)\n",
		seen, median(took), per, ringRecords, per*ringRecords/1e3)
	return nil
}

// ringRecords is about how many records a full 1 MiB ring holds (buildRing's mix).
const ringRecords = 9000

// buildRing is a full ring of a healthy-looking DGX H100 that had a few
// application XIDs: the boot's messages, then a long steady state of the
// messages such nodes log (mlx5 port events, NVMe, systemd's writes as
// facility 3, NVRM notices), until ringSize bytes.
func buildRing(m *sim.Machine) (ring string, records, xids int) {
	var b strings.Builder
	seq, usec := uint64(0), uint64(0)
	add := func(pri int, flags, text string) {
		fmt.Fprintf(&b, "%d,%d,%d,%s;%s\n", pri, seq, usec, flags, text)
		seq++
		usec += 1731
		records++
	}
	for _, r := range m.Kmsg {
		if strings.Contains(r, "NVRM: Xid") {
			continue
		}
		b.WriteString(r + "\n")
		seq++
		records++
	}
	usec = 20_000_000
	boot := []string{
		"Command line: BOOT_IMAGE=/vmlinuz-5.15.0-1042-nvidia root=UUID=6e3f1c2a-9b1d-4c57-a0a4-2f0f9f3b8d11 ro pci=realloc=off iommu=pt",
		"BIOS-e820: [mem 0x0000000000100000-0x000000006f9fefff] usable",
		"ACPI: SRAT: Node 1 PXM 1 [mem 0x4080000000-0x807fffffff]",
		"smpboot: CPU0: Intel(R) Xeon(R) Platinum 8480C (family: 0x6, model: 0x8f, stepping: 0x8)",
		"pci 0000:18:00.0: [10de:2330] type 00 class 0x030200",
		"mlx5_core 0000:1a:00.0: firmware version: 28.39.1002",
		"nvme nvme0: pci function 0000:c3:00.0",
		"nvme nvme0: 64/0/0 default/read/poll queues",
		"EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Opts: (null). Quota mode: none.",
		"nvidia-nvswitch0: Probing device 0000:05:00.0, Vendor Id = 0x10de, Device Id = 0x22a3, Class = 0x68000",
	}
	steady := []struct {
		pri  int
		text string
	}{
		{6, "mlx5_core 0000:%02x:00.0: Port module event: module %d, Cable plugged"},
		{6, "mlx5_core 0000:%02x:00.0 ibp%ds0: Link up"},
		{4, "mlx5_core 0000:%02x:00.0: mlx5_pcie_event:301:(pid %d): PCIe slot advertised sufficient power (27W)."},
		{6, "nvme nvme%d: queue %d: timeout handler disabled"},
		{30, "systemd[1]: Started Session %d of User slurm (uid %d)."},
		{6, "NVRM: GPU at PCI:0000:%02x:00: GPU-4f3e3c35-6d0c-8f0b-2f36-0e5c0b9b%04d"},
		{6, "nvidia-uvm: Loaded the UVM driver, major device number %d, minor %d."},
		{5, "audit: type=1400 audit(1709677436.%03d:%d): apparmor=\"STATUS\" operation=\"profile_replace\" name=\"slurmd\""},
		{6, "IPv6: ADDRCONF(NETDEV_CHANGE): ibp%ds%d: link becomes ready"},
		{4, "perf: interrupt took too long (%d > %d), lowering kernel.perf_event_max_sample_rate to 63000"},
	}
	for i := 0; b.Len() < ringSize; i++ {
		switch {
		case i < len(boot):
			add(6, "-", boot[i])
		case i%1500 == 700:
			// An application's XID: warn class, on one of the GPUs.
			gpuIdx := (i / 1500) % 8
			pci := strings.TrimSuffix(m.Model.PCIBusID(gpuIdx), ".0")
			add(4, "-", fmt.Sprintf("NVRM: Xid (PCI:%s): 13, pid=%d, name=python3, Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Out Of Range Address", pci, 40000+i))
			xids++
		default:
			s := steady[i%len(steady)]
			add(s.pri, "-", fmt.Sprintf(s.text, i%200, i%97))
		}
	}
	return b.String(), records, xids
}
