package remedy

import (
	"errors"
	"fmt"
	"time"

	"github.com/gpuhc/gpuhc/internal/statefile"
)

// Outcomes of an attempt.
const (
	// Pending: a reboot asked for and not yet seen done.
	Pending  = "pending"
	Finished = "finished"
	Failed   = "failed"
)

// Attempt is one remediation of one drain.
type Attempt struct {
	ID        string    `json:"id"`
	Action    string    `json:"action"`
	Check     string    `json:"check"`
	Component string    `json:"component"`
	Serial    string    `json:"serial,omitempty"`
	PCI       string    `json:"pci,omitempty"`
	Model     string    `json:"model,omitempty"`
	DrainAt   time.Time `json:"drain_at"`
	Started   time.Time `json:"started"`
	Boot      string    `json:"boot,omitempty"`
	Outcome   string    `json:"outcome"`
	Ended     time.Time `json:"ended,omitzero"`
	// Judged is set once a run after the attempt finished judged the
	// failure's check on its part: Recurred says it failed again.
	Judged   bool `json:"judged,omitempty"`
	Recurred bool `json:"recurred,omitempty"`
}

// record is the node's remediation state: the latest attempt, the start
// times the daily budget counts, and what the last drain's part is.
type record struct {
	Current *Attempt    `json:"current,omitempty"`
	Starts  []time.Time `json:"starts,omitempty"`
	// Held is the budget that last held a remediation back, so that the
	// reason says so once, not at every run.
	Held string `json:"held,omitempty"`
	// Model and Driver of the drained part, noted by After from the
	// run's GPU inventory (the drain record does not carry them).
	Model  string `json:"model,omitempty"`
	Driver string `json:"driver,omitempty"`
}

// maxStarts bounds the start times kept: the daily budget needs a day's.
const maxStarts = 64

func (r *record) started(at time.Time) {
	r.Starts = append(r.Starts, at)
	if len(r.Starts) > maxStarts {
		r.Starts = r.Starts[len(r.Starts)-maxStarts:]
	}
}

// today counts the starts in the 24 hours up to now. A start in the
// future (the clock stepped back) counts: the budget errs on the side of
// doing less.
func (r *record) today(now time.Time) int {
	n := 0
	for _, s := range r.Starts {
		if now.Sub(s) < 24*time.Hour {
			n++
		}
	}
	return n
}

// store keeps the record as one small file in the state directory.
type store struct {
	dir  statefile.Dir
	name string
}

func (s store) load() (record, error) {
	var r record
	err := s.dir.Load(s.name, &r)
	if errors.Is(err, statefile.ErrCorrupt) {
		// Losing the record loses budgets, never a drain: start afresh.
		return record{}, nil
	}
	if err != nil {
		return record{}, fmt.Errorf("remediation record: %w", err)
	}
	return r, nil
}

func (s store) save(r record) error {
	if err := s.dir.Save(s.name, r); err != nil {
		return fmt.Errorf("remediation record: %w", err)
	}
	return nil
}
