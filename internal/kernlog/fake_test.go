package kernlog

import (
	"context"

	"github.com/gpuhc/gpuhc/internal/kmsg"
)

// fakeReader hands out a fixed snapshot and records who judged it.
type fakeReader struct {
	snap   kmsg.Snapshot
	judged []string
}

func (f *fakeReader) Snapshot(context.Context) kmsg.Snapshot { return f.snap }
func (f *fakeReader) Judged(rule string)                     { f.judged = append(f.judged, rule) }

// replay is a snapshot of text lines of unknown level, as a replayed log.
func replay(boot string, texts ...string) kmsg.Snapshot {
	s := kmsg.Snapshot{BootID: boot}
	for i, t := range texts {
		s.Lines = append(s.Lines, kmsg.Line{Seq: uint64(i), Level: -1, Text: t})
	}
	return s
}
