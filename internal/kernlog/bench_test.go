package kernlog

import (
	"fmt"
	"testing"

	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// A full 1 MiB ring of ordinary boot and runtime lines, none a fault:
// what host.kernel costs a run on the healthy path. From /dev/kmsg most
// lines are info (6) and never reach a rule's expression; a text replay
// has no levels and every line is tried.
func BenchmarkHealthyRing(b *testing.B) {
	b.Run("kmsg", func(b *testing.B) { benchRing(b, func(i int) int { return []int{6, 6, 6, 6, 6, 6, 5, 4, 6, 3}[i%10] }) })
	b.Run("replay", func(b *testing.B) { benchRing(b, func(int) int { return -1 }) })
}

func benchRing(b *testing.B, level func(int) int) {
	common := []string{
		"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024",
		"mlx5_core 0000:1b:00.0: firmware version: 28.39.1002",
		"EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Opts: (null)",
		"pcieport 0000:00:03.1: AER: Correctable error message received from 0000:00:00.0",
		"IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready",
		"nvidia-nvswitch0: open (major=510)",
		"audit: type=1400 audit(1700000000.123:42): apparmor=\"STATUS\" operation=\"profile_load\" name=\"slurmd\"",
		"EDAC MC1: 1 CE memory read error on CPU_SrcID#1_MC#0_Chan#0_DIMM#0 (channel:0 slot:0 page:0xee30a0 offset:0x0 grain:32)",
	}
	var lines []kmsg.Line
	size := 0
	for i := 0; size < 1<<20; i++ {
		t := fmt.Sprintf("%s (%d)", common[i%len(common)], i)
		lines = append(lines, kmsg.Line{Seq: uint64(i), Level: level(i), Text: t})
		size += len(t) + 40
	}
	dir := statefile.Dir{Path: b.TempDir()}
	b.ResetTimer()
	for range b.N {
		r := &fakeReader{Snap: kmsg.Snapshot{BootID: "b", Lines: lines}}
		New(defaults(), nil, dir, r).Run(b.Context())
	}
}
