package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/atomicfile"
	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/metrics"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// maxGap is the most operating time one gap between two runs may count.
//
// Operating hours (MTTF's numerator) are the sum of the gaps between
// consecutive runs: slurmd runs the health check every
// HealthCheckInterval (seconds to minutes in practice) for as long as the
// node and slurmd are up, so a long gap means they were not. A fixed hour
// is simpler and sturdier than a cap derived from the observed interval
// (which a reboot, an admin's runs or a changed interval would skew): it
// counts every gap of a node checked at least hourly in full, and an
// outage (powered off for a week, slurmd stopped) adds at most one hour.
// A site whose HealthCheckInterval exceeds an hour undercounts.
const maxGap = time.Hour

// history is what the health check remembers between runs besides the
// policy's state: the heartbeat clock and the FAIL episode counts behind
// gpuhc_failures_total. It is rewritten after every run that is not a
// dry run, one small file.
type history struct {
	// LastRun is when the previous run finished.
	LastRun time.Time `json:"last_run"`
	// LastHeartbeat is when the last heartbeat event was written, or when
	// the clock started.
	LastHeartbeat time.Time `json:"last_heartbeat"`
	// OperatingSeconds is the operating time counted since LastHeartbeat
	// and not yet reported in a heartbeat.
	OperatingSeconds float64 `json:"operating_seconds"`
	// Failures counts FAIL episodes per check.
	Failures metrics.Episodes `json:"failures"`
	// Serials are the GPU serials present during OperatingSeconds, which
	// the next heartbeat credits with those hours; nil until a run has
	// seen GPUs with serials.
	Serials []string `json:"serials,omitempty"`
}

// historyFile is node's history in the state directory; like the policy
// state, one file per node.
func historyFile(stateDir, node string) string {
	return filepath.Join(stateDir, "history."+node+".json")
}

var errHistoryCorrupt = errors.New("corrupt history file")

// loadHistory reads the history; a missing file is a first run.
func loadHistory(path string) (history, error) {
	var h history
	b, err := sysread.Regular(path, 16<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return history{}, fmt.Errorf("%w %s: %v", errHistoryCorrupt, path, err)
	}
	// The file is ours, but its serials go into events: keep only what a
	// run could have written.
	h.Serials = serialSet(h.Serials)
	return h, nil
}

// saveHistory replaces the file atomically.
func saveHistory(path string, h history) error {
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode history: %w", err)
	}
	return atomicfile.Write(path, append(b, '\n'), atomicfile.State(".history-*.json"))
}

// tick counts the gap since the previous run, capped at maxGap, and
// reports whether a heartbeat is due. The first run ever only starts the
// clock. A clock that stepped back counts nothing and restarts from now.
func (h *history) tick(now time.Time, interval time.Duration) bool {
	if h.LastRun.IsZero() {
		h.LastRun, h.LastHeartbeat, h.OperatingSeconds = now, now, 0
		return false
	}
	if gap := now.Sub(h.LastRun); gap > 0 {
		h.OperatingSeconds += min(gap, maxGap).Seconds()
	}
	h.LastRun = now
	if h.LastHeartbeat.IsZero() || h.LastHeartbeat.After(now) {
		h.LastHeartbeat = now
	}
	return now.Sub(h.LastHeartbeat) >= interval
}

// hours rounds operating seconds to hours with 4 decimals (0.36 s).
func hours(seconds float64) float64 {
	return math.Round(seconds/3600*1e4) / 1e4
}

// record keeps the books after a run that is not a dry run: the
// measurement events, FAIL episode counts, the heartbeat clock and
// event, the history file, and the metrics file. None of it may change
// the run's outcome: every failure here is logged, and the exit code and
// the drain decision (already made) stand.
func (p Program) record(ctx context.Context, log *logrus.Entry, node string, cfg config.Config,
	timed []check.Timed, results []check.Result, drained, suppressed bool, by string) {
	now := p.Clock()
	base := events.Event{Time: now, Node: node, By: by, BootID: p.bootID(cfg)}
	if err := (events.Log{Path: cfg.Events.File}).Append(ctx, events.Measurements(base, results)...); err != nil {
		log.WithError(err).Error("measurement events not written")
	}
	path := historyFile(cfg.StateDir, node)
	h, err := loadHistory(path)
	save := true
	if err != nil {
		log.WithError(err).Error("run history (heartbeat clock, FAIL episode counts): starting afresh")
		// Unreadable (EIO, permissions): do not overwrite what we could not
		// read. A corrupt file is replaced.
		save = errors.Is(err, errHistoryCorrupt)
	}
	h.Failures, _ = h.Failures.Update(results)
	saved := false
	if save {
		saved = p.heartbeat(ctx, log, node, cfg, path, &h, now, presentSerials(results))
	}
	if cfg.Metrics.TextfileDir == "" {
		return
	}
	if !saved {
		// The counts just computed were not kept; publishing them would let
		// gpuhc_failures_total go down on the next run.
		log.Error("metrics not written: the run history could not be saved")
		return
	}
	snap := metrics.Snapshot{Results: results, Timed: timed, Failures: h.Failures.Total, LastRun: now, Drained: drained, Suppressed: suppressed}
	if err := metrics.WriteTextfile(cfg.Metrics.TextfileDir, snap.Format()); err != nil {
		log.WithError(err).Error("metrics not written")
	}
}

// heartbeat advances the clock, writes the heartbeat event when one is
// due, and saves the history; it reports whether the history was saved.
// The history is saved before the event is appended: if the save failed
// after the append, every later run would reload the old clock and write
// the same hours again, inflating MTTF. Losing hours is the safe side.
//
// present are the GPU serials this run saw (nil: none, or none known).
// When they differ from those the pending hours belong to, a heartbeat
// is written at once, before it is due, so that a GPU moved to another
// node takes only its own hours along and its successor starts at zero.
func (p Program) heartbeat(ctx context.Context, log *logrus.Entry, node string, cfg config.Config, path string, h *history, now time.Time, present []string) bool {
	due := h.tick(now, cfg.Events.Heartbeat.Duration)
	moved := present != nil && h.Serials != nil && !slices.Equal(present, h.Serials) && h.OperatingSeconds > 0
	if !due && !moved {
		if present != nil {
			h.Serials = present
		}
		if err := saveHistory(path, *h); err != nil {
			log.WithError(err).Error("run history not saved")
			return false
		}
		return true
	}
	before := *h
	serials := h.Serials
	if serials == nil {
		// A history from before serials were kept: the GPUs present now
		// are the best account of the hours.
		serials = present
	}
	h.OperatingSeconds, h.LastHeartbeat = 0, now
	if present != nil {
		h.Serials = present
	}
	if err := saveHistory(path, *h); err != nil {
		log.WithError(err).Error("run history not saved; no heartbeat this run")
		return false
	}
	beat := events.Event{
		Time: now, Kind: events.KindHeartbeat, Node: node, By: "healthcheck",
		Hours: hours(before.OperatingSeconds), Serials: serials, BootID: p.bootID(cfg),
	}
	if err := (events.Log{Path: cfg.Events.File}).Append(ctx, beat); err != nil {
		log.WithError(err).Error("heartbeat event not written; its hours go into the next one")
		h.OperatingSeconds, h.LastHeartbeat, h.Serials = before.OperatingSeconds, before.LastHeartbeat, before.Serials
		if err := saveHistory(path, *h); err != nil {
			log.WithError(err).Error("run history not saved")
		}
	}
	return true
}

// maxSerials bounds the serials a heartbeat lists: more GPUs than any
// node has (16 on the largest today) but few enough for one event line.
const maxSerials = 64

// presentSerials are the GPU serials named by the run's results, sorted
// and once each; nil when there are none. A serial comes from the
// driver, so one that is not a short run of printable ASCII (NVML's are
// digits) is left out rather than written into every heartbeat.
func presentSerials(results []check.Result) []string {
	named := make([]string, 0, len(results))
	for _, r := range results {
		named = append(named, r.IDs.Serial)
	}
	return serialSet(named)
}

// serialSet is the valid serials of named, sorted and once each, at most
// maxSerials; nil when none is valid.
func serialSet(named []string) []string {
	var out []string
	for _, s := range named {
		if validSerial(s) && !slices.Contains(out, s) && len(out) < maxSerials {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

func validSerial(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// bootID is the run's boot id: the one read its checks share, or, before
// the environment is built (a run that found the lock held), a read of
// its own.
func (p Program) bootID(cfg config.Config) string {
	if p.boot != nil {
		return p.boot.ID()
	}
	return events.BootID(cfg.Root)
}
