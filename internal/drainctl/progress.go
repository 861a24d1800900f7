package drainctl

import (
	"fmt"
	"time"
)

// progressEvery is how many events pass between two looks at the clock,
// so that the common case costs a counter increment.
const progressEvery = 4096

// progress shows on a terminal's stderr how many events have been read,
// one line rewritten in place at most every progressInterval. Reading a
// year of a large fleet's logs takes seconds; silence on a terminal looks
// like a hang. On anything but a terminal (a pipe, a file, cron) it
// prints nothing, so that logs and scripts see only warnings and errors.
type progress struct {
	p      Program
	on     bool
	events int
	last   time.Time
	shown  bool
}

const progressInterval = 200 * time.Millisecond

func (p Program) newProgress() *progress {
	return &progress{p: p, on: p.StderrIsTerminal != nil && p.StderrIsTerminal(), last: p.now()}
}

func (g *progress) tick() {
	if !g.on {
		return
	}
	g.events++
	if g.events%progressEvery != 0 {
		return
	}
	if now := g.p.now(); now.Sub(g.last) >= progressInterval {
		g.last = now
		g.shown = true
		fmt.Fprintf(g.p.Stderr, "\r%s: reading event logs: %d events\x1b[K", prog, g.events)
	}
}

// clear removes the progress line, before a warning or at the end.
func (g *progress) clear() {
	if g.shown {
		fmt.Fprint(g.p.Stderr, "\r\x1b[K")
		g.shown = false
	}
}

func (g *progress) done() { g.clear() }
