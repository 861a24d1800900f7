package kmsg

import (
	"context"
	"slices"
	"sync"
)

// Fixed is a Reader that gives every rule the same snapshot and records
// who said Judged: for a rule's tests, which need no cursor.
//
//	r := &kmsg.Fixed{Snap: kmsg.Snapshot{BootID: "b", Lines: kmsg.ReplayLines(text)}}
type Fixed struct {
	Snap Snapshot

	mu     sync.Mutex
	judged []string
}

// Snapshot returns f.Snap.
func (f *Fixed) Snapshot(context.Context) Snapshot { return f.Snap }

// Judged records rule.
func (f *Fixed) Judged(rule string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.judged = append(f.judged, rule)
}

// JudgedBy are the rules that said Judged, in order.
func (f *Fixed) JudgedBy() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.judged)
}

// ReplayLines are the kernel lines of a saved log in any of the formats
// --kernel-log takes (ParseReplay), rebuilt as a run rebuilds them: for
// tests over a corpus of pasted lines. An unfinished XID/SXid line at the
// very end is dropped, as a run would hold it.
func ReplayLines(text string) []Line {
	lines, _ := Lines(ParseReplay(text))
	return lines
}
