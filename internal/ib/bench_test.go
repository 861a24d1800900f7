package ib

import (
	"testing"

	"github.com/gpuhc/gpuhc/internal/statefile"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// BenchmarkPortAndCounters is one healthy run of ib.port and ib.counters
// on the h100-ndr tree (9 HCAs): what IB adds to every health check.
func BenchmarkPortAndCounters(b *testing.B) {
	root := sysfsfix.Tree(b, sysfsfix.H100NDR)
	setBoot(b, root, bootA)
	st := statefile.Dir{Path: b.TempDir()}
	port, counters := NewPort(NewGather(root), h100Config()), NewCounters(root, NewGather(root), h100Config(), st)
	run(b, counters) // the baseline
	for b.Loop() {
		run(b, port)
		run(b, counters)
	}
}
