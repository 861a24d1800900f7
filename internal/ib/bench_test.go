package ib

import (
	"testing"

	"github.com/gpuhc/gpuhc/internal/statefile"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// BenchmarkPortAndCounters is one healthy run of ib.port and ib.counters
// on the h100-ndr tree (9 HCAs): what IB adds to every health check. Each
// iteration is a run, with its own scan of the devices.
func BenchmarkPortAndCounters(b *testing.B) {
	root := sysfsfix.Tree(b, sysfsfix.H100NDR)
	setBoot(b, root, bootA)
	st := statefile.Dir{Path: b.TempDir()}
	run(b, NewCounters(root, NewGather(root), h100Config(), st)) // the baseline
	for b.Loop() {
		devs := NewGather(root)
		run(b, NewPort(devs, h100Config()))
		run(b, NewCounters(root, devs, h100Config(), st))
	}
}

// BenchmarkB200Checks is one healthy run of ib.port, ib.counters and
// ib.gdr on the b200 tree (12 ConnectX functions, each with a VPD), with
// a scan per check as before the Gather, and with the run's one scan.
func BenchmarkB200Checks(b *testing.B) {
	root := sysfsfix.Tree(b, sysfsfix.B200)
	setBoot(b, root, bootA)
	st := statefile.Dir{Path: b.TempDir()}
	run(b, NewCounters(root, NewGather(root), b200Config(), st)) // the baseline
	for _, bc := range []struct {
		name string
		devs func() [3]*Gather
	}{
		{"scan per check", func() [3]*Gather { return [3]*Gather{NewGather(root), NewGather(root), NewGather(root)} }},
		{"one scan", func() [3]*Gather { g := NewGather(root); return [3]*Gather{g, g, g} }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				d := bc.devs()
				run(b, NewPort(d[0], b200Config()))
				run(b, NewCounters(root, d[1], b200Config(), st))
				run(b, NewGDR(root, d[2], b200Config(), nil))
			}
		})
	}
}
