package drainctl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/sysread"
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
// so one batch keeps its order). With an incompleteLogs error, the events
// of the logs that could be read are returned too.
func (p Program) readEvents(ctx context.Context, o *common, keep func(events.Event) bool) ([]events.Event, error) {
	var evs []events.Event
	err := p.scanEach(ctx, o, func(ev events.Event) {
		if keep == nil || keep(ev) {
			evs = append(evs, ev)
		}
	})
	if _, fatal := incomplete(err); fatal != nil {
		return nil, fatal
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Time.Before(evs[j].Time) })
	return evs, err
}

// incompleteLogs is the end of a command that printed what it could from
// the configured event logs while some could not be read: exit 3.
type incompleteLogs struct{ unread int }

func (e incompleteLogs) Error() string {
	return fmt.Sprintf("event logs incomplete: %d could not be read (see the warnings); the output above leaves them out", e.unread)
}

// incomplete splits an error of scanEach: partial is an incompleteLogs
// error (print the output, then return it), fatal anything else.
func incomplete(err error) (partial, fatal error) {
	var il incompleteLogs
	if errors.As(err, &il) {
		return err, nil
	}
	return nil, err
}

// maxUnreadWarnings bounds the warnings about unreadable logs (a user who
// may not read any of 10,000 nodes' logs gets a few and a count).
const maxUnreadWarnings = 10

// scanEach hands every event of the sources to fn, in file order.
// Unreadable lines are warnings. With --events, a source that cannot be
// read at all is an error (exit 3, nothing printed). The configured logs
// may be missing (a node that never failed has none); a configured log
// that exists but cannot be read is skipped with a warning, the others
// are read, and scanEach returns an incompleteLogs error: the command
// prints its output, then exits 3.
func (p Program) scanEach(ctx context.Context, o *common, fn func(events.Event)) error {
	srcs, defaulted, err := p.sources(o)
	if err != nil || len(srcs) == 0 {
		return err
	}
	pg := p.newProgress()
	defer pg.done()
	warn := func(msg string) { pg.clear(); fmt.Fprintf(p.Stderr, "%s: warning: %s\n", prog, msg) }
	each := func(ev events.Event) error {
		fn(ev)
		pg.tick()
		return nil
	}
	if !defaulted {
		if err := events.Scan(ctx, srcs, p.Stdin, warn, each); err != nil {
			return exitError{ExitInternal, fmt.Errorf("event logs: %w", err)}
		}
		return nil
	}
	files, unread, err := readableLogs(srcs[0], warn)
	if err != nil {
		return exitError{ExitInternal, fmt.Errorf("event logs %s: %w", srcs[0], err)}
	}
	if len(files) == 0 && unread == 0 {
		if o.verbose {
			warn("no event logs match " + srcs[0])
		}
		return nil
	}
	if len(files) > 0 {
		if err := events.Scan(ctx, files, nil, warn, each); err != nil {
			if ctx.Err() != nil {
				return exitError{ExitInternal, fmt.Errorf("event logs: %w", err)}
			}
			// An I/O error while reading: the logs after it are not read.
			warn(fmt.Sprintf("event logs %s: %v; the logs after it were not read (use --events)", srcs[0], err))
			unread++
		}
	}
	if unread > 0 {
		return exitError{ExitInternal, incompleteLogs{unread}}
	}
	return nil
}

// readableLogs lists the files that pattern (the configured events.file
// and its rotated copies) matches and that can be opened, escaped for
// events.Scan. Each one that exists but cannot be opened is warned about
// (the first maxUnreadWarnings) and counted in unread, and so is a
// directory of the pattern that cannot be listed when nothing matches.
// A file gone between listing and opening (rotated away) is left out
// silently.
func readableLogs(pattern string, warn func(string)) (files []string, unread int, err error) {
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return nil, 0, err
	}
	bad := func(msg string) {
		unread++
		if unread <= maxUnreadWarnings {
			warn(msg + "; skipped")
		}
	}
	if len(matches) == 0 {
		// Glob says nothing of a directory it could not list.
		dir := fixedDir(pattern)
		if _, err := os.ReadDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			bad(fmt.Sprintf("event logs: %v", err))
		}
	}
	for _, m := range matches {
		fi, err := os.Stat(m)
		if err == nil && !fi.IsDir() {
			var f *os.File
			if f, err = sysread.Open(m); err == nil {
				f.Close()
			}
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			bad(fmt.Sprintf("event log %v", err))
			continue
		}
		if strings.ContainsAny(m, "*?[") {
			// events.Scan takes such a name for a glob: escape it.
			m = globEscaper.Replace(m)
		}
		files = append(files, m)
	}
	if unread > maxUnreadWarnings {
		warn(fmt.Sprintf("%d more event logs could not be read; skipped", unread-maxUnreadWarnings))
	}
	return files, unread, nil
}

var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`)

// fixedDir is the longest leading directory of a glob pattern without
// wildcards.
func fixedDir(pattern string) string {
	dir := filepath.Dir(pattern)
	for strings.ContainsAny(dir, "*?[") {
		dir = filepath.Dir(dir)
	}
	return dir
}
