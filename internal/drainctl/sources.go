package drainctl

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
)

// sources are the event logs to read: --events, or else the configured
// events.file and its rotated siblings, for every node when the name
// holds %n. defaulted reports the latter: then missing logs are normal
// (a node that never failed has none).
func (p Program) sources(o *common) (srcs []string, defaulted bool, err error) {
	if len(o.events) > 0 {
		return o.events, false, nil
	}
	tmpl, err := p.eventTemplate(o)
	if err != nil {
		return nil, true, err
	}
	if tmpl == "" {
		return nil, true, nil
	}
	// "events.jsonl*" also takes events.jsonl.1 and events.jsonl.2.gz.
	return []string{strings.ReplaceAll(tmpl, config.NodeVar, "*") + "*"}, true, nil
}

// readEvents reads every event that keep accepts, sorted by time (stable,
// so one batch keeps its order).
func (p Program) readEvents(ctx context.Context, o *common, keep func(events.Event) bool) ([]events.Event, error) {
	var evs []events.Event
	err := p.scanEach(ctx, o, func(ev events.Event) {
		if keep == nil || keep(ev) {
			evs = append(evs, ev)
		}
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Time.Before(evs[j].Time) })
	return evs, nil
}

// scanEach hands every event of the sources to fn, in file order.
// Unreadable lines are warnings. With --events, a source that cannot be
// read at all is an error; the configured logs may be missing (a node
// that never failed has none) or unreadable (a warning).
func (p Program) scanEach(ctx context.Context, o *common, fn func(events.Event)) error {
	srcs, defaulted, err := p.sources(o)
	if err != nil || len(srcs) == 0 {
		return err
	}
	warn := func(msg string) { fmt.Fprintf(p.Stderr, "%s: warning: %s\n", prog, msg) }
	if defaulted {
		if m, _ := filepath.Glob(srcs[0]); len(m) == 0 {
			if o.verbose {
				warn("no event logs match " + srcs[0])
			}
			return nil
		}
	}
	err = events.Scan(ctx, srcs, p.Stdin, warn, func(ev events.Event) error {
		fn(ev)
		return nil
	})
	if err != nil {
		if defaulted {
			warn(fmt.Sprintf("event logs %s: %v (use --events)", strings.Join(srcs, " "), err))
			return nil
		}
		return exitError{ExitInternal, fmt.Errorf("event logs: %w", err)}
	}
	return nil
}
