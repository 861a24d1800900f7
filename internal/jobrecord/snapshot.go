package jobrecord

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/xid"
)

// Position is where the kernel log stands: the sequence number its next
// record will have. It reads the whole log (as gpu.xid does on a first
// run); an incomplete read is an error, since a position short of the end
// would give the job XIDs logged before it started.
func Position(ctx context.Context, src kmsg.Source) (uint64, error) {
	b, err := src.Records(ctx, math.MaxUint64)
	if err != nil {
		return 0, err
	}
	if !b.Complete {
		return 0, errors.New("the kernel log could not be read to its end in time")
	}
	if b.Seen == 0 {
		return 0, nil
	}
	return b.Newest + 1, nil
}

// Snapshot reads every GPU's memory error counters. A counter NVML does
// not answer is left nil; a hung GPU ends the snapshot with what it has.
func Snapshot(ctx context.Context, n *gpu.Node) ([]Counters, error) {
	inv, err := n.Inventory(ctx)
	if err != nil {
		return nil, err
	}
	var out []Counters
	for _, g := range inv.GPUs {
		c, err := counters(ctx, g)
		out = append(out, c)
		if err != nil {
			return out, fmt.Errorf("%s: %w", g.Component(), err)
		}
	}
	return out, nil
}

func counters(ctx context.Context, g gpu.GPU) (Counters, error) {
	c := Counters{PCI: g.PCIBusID, Index: g.Index, UUID: g.UUID, Serial: g.Serial}
	d := g.Device
	var err error
	if c.DBE, err = count(ctx, func() (uint64, nvml.Return) {
		v, ret := d.GetMemoryErrorCounter(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC, nvml.MEMORY_LOCATION_DEVICE_MEMORY)
		if gpu.Unsupported(ret) {
			return d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		}
		return v, ret
	}); err != nil {
		return c, err
	}
	if c.Corrected, err = count(ctx, func() (uint64, nvml.Return) {
		return d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	}); err != nil {
		return c, err
	}
	if c.SRAM, err = count(ctx, func() (uint64, nvml.Return) {
		return d.GetMemoryErrorCounter(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC, nvml.MEMORY_LOCATION_SRAM)
	}); err != nil {
		return c, err
	}
	type rows struct {
		corr, unc       int
		pending, failed bool
	}
	r, ret, err := gpu.Call(ctx, func() (rows, nvml.Return) {
		corr, unc, pending, failed, ret := d.GetRemappedRows()
		return rows{corr, unc, pending, failed}, ret
	})
	if err != nil {
		return c, err
	}
	if ret == nvml.SUCCESS && r.corr >= 0 && r.unc >= 0 {
		c.RemapCorr, c.RemapUnc, c.RemapPending, c.RemapFailed = &r.corr, &r.unc, &r.pending, &r.failed
	}
	return c, nil
}

// count is one counter: nil unless NVML answered with a value.
func count(ctx context.Context, f func() (uint64, nvml.Return)) (*uint64, error) {
	v, ret, err := gpu.Call(ctx, f)
	if err != nil || ret != nvml.SUCCESS {
		return nil, err
	}
	return &v, nil
}

// Change is one counter that grew during the job.
type Change struct {
	Counters // the GPU, as the epilog saw it (counters after the job)
	// Severe: an uncorrected error, a pending or failed row remap; else
	// corrected errors and correctable remaps.
	Severe  bool
	Message string
}

// Diff lists what grew between the prolog's counters and the epilog's,
// matching GPUs by PCI address (indices shift when a GPU drops out).
// Volatile counters that went down were reset (a GPU reset, a driver
// reload): nothing to attribute. A GPU the epilog no longer sees is a
// change of its own.
func Diff(before, after []Counters) []Change {
	byPCI := map[string]Counters{}
	for _, c := range after {
		byPCI[c.PCI] = c
	}
	var out []Change
	for _, b := range before {
		a, ok := byPCI[b.PCI]
		if !ok {
			out = append(out, Change{Counters: b, Severe: true, Message: "GPU no longer listed by NVML"})
			continue
		}
		grew := func(severe bool, what string, old, cur *uint64) {
			if old != nil && cur != nil && *cur > *old {
				out = append(out, Change{Counters: a, Severe: severe, Message: fmt.Sprintf("%s %d -> %d", what, *old, *cur)})
			}
		}
		grew(true, "volatile DBE", b.DBE, a.DBE)
		grew(true, "SRAM uncorrectable", b.SRAM, a.SRAM)
		grew(false, "volatile corrected ECC", b.Corrected, a.Corrected)
		rows := func(severe bool, what string, old, cur *int) {
			if old != nil && cur != nil && *cur > *old {
				out = append(out, Change{Counters: a, Severe: severe, Message: fmt.Sprintf("%s %d -> %d", what, *old, *cur)})
			}
		}
		rows(true, "uncorrectable remapped rows", b.RemapUnc, a.RemapUnc)
		rows(false, "correctable remapped rows", b.RemapCorr, a.RemapCorr)
		flag := func(what string, old, cur *bool) {
			if cur != nil && *cur && (old == nil || !*old) {
				out = append(out, Change{Counters: a, Severe: true, Message: what})
			}
		}
		flag("row remap pending", b.RemapPending, a.RemapPending)
		flag("row remap failed", b.RemapFailed, a.RemapFailed)
	}
	return out
}

// XIDs returns the XIDs the kernel logged since the record's position.
// note says what limits the answer ("" when nothing does).
func XIDs(ctx context.Context, src kmsg.Source, r Record) (events []xid.Event, note string, err error) {
	if !r.KmsgOK {
		return nil, "the prolog could not read the kernel log", nil
	}
	from := r.KmsgNext
	if boot := src.BootID(); boot != "" && r.BootID != "" && boot != r.BootID {
		// Sequence numbers restarted: the whole log is after the start.
		from, note = 0, "the node rebooted during the job"
	}
	b, err := src.Records(ctx, from)
	if err != nil {
		return nil, "", err
	}
	if from > 0 && b.Complete && b.Seen > 0 && b.Newest+1 < from {
		// The log restarted without a boot id to say so.
		from, note = 0, "the kernel log restarted during the job"
		if b, err = src.Records(ctx, 0); err != nil {
			return nil, "", err
		}
	}
	if !b.Complete {
		note = join(note, "the kernel log could not be read to its end in time")
	}
	lines, _ := kmsg.Lines(b.Records)
	events = xid.Events(lines)
	return events, note, nil
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
