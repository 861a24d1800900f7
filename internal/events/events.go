// Package events appends gpuhc's failure and action records to a JSON-lines
// log, the raw material for MTTF/MTTR statistics
// (docs/architecture.md#events-and-mttf).
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuhc/gpuhc/internal/bootid"
	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// Kinds of event.
const (
	KindTransition      = "transition"
	KindDrain           = "drain"
	KindResume          = "resume"
	KindDrainSuppressed = "drain-suppressed"
	KindDrainSkipped    = "drain-skipped" // a foreign drain was left alone
	// KindHeartbeat records operating hours observed, so nodes that never
	// fail still count towards MTTF.
	KindHeartbeat = "heartbeat"
	// KindProlog and KindEpilog are one per gpuhc-prolog or gpuhc-epilog
	// run: job id, user, mode, worst status, what the policy did and how
	// long it took. `grep '"kind":"prolog"' | grep '"mode":"full"'` lists
	// the full prologs.
	KindProlog = "prolog"
	KindEpilog = "epilog"
	// KindJobXID is an XID the driver logged while a job ran, named by the
	// epilog from the kernel log position its prolog recorded.
	KindJobXID = "job-xid"
	// KindJobMemory is a GPU memory error counter (ECC, remapped rows)
	// that grew while a job ran.
	KindJobMemory = "job-memory"
	// KindJobLeftover is a GPU process, or GPU memory, a job left behind,
	// with what the epilog did about it.
	KindJobLeftover = "job-leftover"
	// KindMeasurement is one figure a check measured (gpuhc-healthcheck
	// --deep, the full prolog: bandwidth), with its name, value, unit and
	// floor, the component it is about and the status it was given. It is
	// a record of performance over time, not a change of state: the
	// statistics count no episode from it.
	KindMeasurement = "measurement"
	// KindKilled is a health check run ended by a signal (slurmd's SIGTERM
	// at HealthCheckTimeout), naming the checks still running.
	KindKilled = "killed"
	// Remediation (docs/remediation.md): gpuhc-healthcheck carrying out a
	// drain's suggested action on an idle node it drained. Started names
	// the action and the part; finished and failed carry Seconds, the
	// time from started. A reboot finishes in the first run of a new boot.
	KindRemediationStarted  = "remediation-started"
	KindRemediationFinished = "remediation-finished"
	KindRemediationFailed   = "remediation-failed"
	// KindRMA is a drain escalated to a return to the vendor: the same
	// check failing on the same part after Remediations remediations. It
	// carries the part's serial, PCI address, model and driver, for the
	// vendor ticket (gpuhc-drain rma), and is never auto-resumed.
	KindRMA = "rma"
	// KindQuarantineApplied and KindQuarantineReverted are gpuhc-drain
	// lemons --apply and --revert on one node: Original is what the node
	// had before (its Weight and active features), Applied what gpuhc set.
	KindQuarantineApplied  = "quarantine-applied"
	KindQuarantineReverted = "quarantine-reverted"
)

// Event is one line of the log. Field names are the log's schema: readers
// outside Go (jq, the site's log pipeline) depend on them.
type Event struct {
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"`
	Node      string    `json:"node"`
	Check     string    `json:"check,omitempty"`
	Component string    `json:"component,omitempty"`
	Serial    string    `json:"serial,omitempty"`
	Status    string    `json:"status,omitempty"`
	Previous  string    `json:"previous,omitempty"`
	Message   string    `json:"message,omitempty"`
	Action    string    `json:"action,omitempty"`
	Backend   string    `json:"backend,omitempty"`
	// By is who acted: "healthcheck", "healthcheck --deep", "prolog",
	// "epilog", or "gpuhc-drain:<user>" for an admin.
	By string `json:"by,omitempty"`
	// Hours is the operating time a heartbeat covers.
	Hours float64 `json:"hours,omitempty"`
	// Serials are the GPU serials present during a heartbeat, so a GPU
	// keeps its exposure when moved between nodes.
	Serials []string `json:"serials,omitempty"`
	// Mode is a prolog's mode ("quick" or "full").
	Mode string `json:"mode,omitempty"`
	// User is the job's user, in prolog and epilog events.
	User string `json:"user,omitempty"`
	// XID is the XID number of a job-xid event.
	XID int `json:"xid,omitempty"`
	// Seconds is how long a prolog or epilog run took, or a
	// remediation (finished, failed) from its start.
	Seconds float64 `json:"seconds,omitempty"`
	// PCI, Model and Driver name the part of a remediation or rma event.
	PCI    string `json:"pci,omitempty"`
	Model  string `json:"model,omitempty"`
	Driver string `json:"driver,omitempty"`
	// Remediations is how many remediations of this problem on this part
	// came before an rma event.
	Remediations int `json:"remediations,omitempty"`
	// Original and Applied are a quarantine's node settings before and
	// as gpuhc set them, as "weight=1 features=a,b".
	Original string `json:"original,omitempty"`
	Applied  string `json:"applied,omitempty"`
	// Name, Value, Unit and Floor are a measurement's figure (check.Figure):
	// "h2d", 52.4, "GB/s", 48. Value is a pointer so that a measured 0 is
	// written; Floor is left out when the figure was not judged.
	Name   string   `json:"name,omitempty"`
	Value  *float64 `json:"value,omitempty"`
	Unit   string   `json:"unit,omitempty"`
	Floor  float64  `json:"floor,omitempty"`
	JobID  string   `json:"job_id"`
	BootID string   `json:"boot_id"`
}

// Measurements makes one measurement event per figure the results carry
// (check.Result.Figures), each a copy of base (time, node, by, job id,
// boot id) with the result's check, component, serial, status and
// message and the figure. Results without figures give none.
func Measurements(base Event, results []check.Result) []Event {
	var out []Event
	for _, r := range results {
		for _, f := range r.Figures {
			if !finite(f.Value) || !finite(f.Floor) {
				// JSON has no NaN: one bad figure would lose the batch.
				continue
			}
			ev := base
			ev.Kind = KindMeasurement
			ev.Check, ev.Component, ev.Serial = r.Check, r.Component, r.IDs.Serial
			ev.Status, ev.Message = r.Status.String(), r.Message
			v := f.Value
			ev.Name, ev.Value, ev.Unit, ev.Floor = f.Name, &v, f.Unit, f.Floor
			out = append(out, ev)
		}
	}
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Log appends events to one file; an empty Path turns logging off.
type Log struct {
	Path string
}

// Append writes events as one batch: under an exclusive flock, so that a
// healthcheck and an epilog writing at once never interleave lines, and
// fsynced, so that a crash right after a drain does not lose its record.
func (l Log) Append(ctx context.Context, evs ...Event) error {
	if len(evs) == 0 || l.Path == "" {
		return nil
	}
	var buf []byte
	for _, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
		buf = append(append(buf, b...), '\n')
	}
	if err := os.MkdirAll(filepath.Dir(l.Path), 0o750); err != nil {
		return fmt.Errorf("create event log directory: %w", err)
	}
	f, err := sysread.OpenFile(l.Path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	defer f.Close()
	if err := lock(ctx, f); err != nil {
		return fmt.Errorf("lock %s: %w", l.Path, err)
	}
	if torn, err := endsTorn(f); err != nil {
		return fmt.Errorf("read end of %s: %w", l.Path, err)
	} else if torn {
		// A writer killed mid-line left a fragment: end it, so readers lose
		// that fragment and not also our first event.
		buf = append([]byte{'\n'}, buf...)
	}
	if _, err := f.Write(buf); err != nil {
		return fmt.Errorf("append to %s: %w", l.Path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", l.Path, err)
	}
	return nil
}

// endsTorn reports whether the file's last byte is not a newline.
func endsTorn(f *os.File) (bool, error) {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return false, err
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], fi.Size()-1); err != nil {
		return false, err
	}
	return b[0] != '\n', nil
}

// lock polls for the exclusive lock rather than blocking in flock(2): a
// writer stuck on a hung filesystem must not carry us past slurmd's kill.
func lock(ctx context.Context, f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// BootID reads the kernel's boot id under root, so that events (and the
// MTTF maths later) can tell reboots apart. Empty when unreadable. A run
// shares one read (bootid.Once); this is for callers outside one.
func BootID(root string) string {
	id, _ := bootid.Read(root)
	return id
}
