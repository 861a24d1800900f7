package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"time"

	"github.com/gpuhc/gpuhc/internal/atomicfile"
	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// State is what the policy remembers between runs, kept in the state
// directory. It is the reason a healthy node needs no Slurm call: only a
// node recorded here as drained by us is ever looked up.
type State struct {
	// Drained is set while a drain we made (or adopted) is in force.
	Drained *Drain `json:"drained,omitempty"`
	// HealthyRuns counts consecutive healthy runs since Drained was set.
	HealthyRuns int `json:"healthy_runs,omitempty"`
	// Foreign is the foreign reason we last saw and left alone, so that
	// each run does not log the same skip again.
	Foreign string `json:"foreign,omitempty"`
	// Suppressed is the reason of the drain the storm guard last refused,
	// so that a node refused run after run records one event, not one
	// per run.
	Suppressed string `json:"suppressed,omitempty"`
	// Last holds each component's previous status, to log transitions.
	Last map[string]check.Status `json:"last,omitempty"`
}

// Drain records a drain of ours.
type Drain struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	// By is the program that drained: "healthcheck", "prolog" or "epilog"
	// (empty in records written before job runs existed: the health
	// check's).
	By string `json:"by,omitempty"`
	// Uncounted marks a drain the storm guard has not yet counted against
	// its limit (the recount's list failed, or the drain was adopted): the
	// next run counts it and gives it back if it is over.
	Uncounted bool `json:"uncounted,omitempty"`
	// The failure the reason names, and its suggested action: what
	// remediation (internal/remedy) acts on. Empty in records written
	// before remediation existed, which are never remediated.
	Check     string `json:"check,omitempty"`
	Component string `json:"component,omitempty"`
	Serial    string `json:"serial,omitempty"`
	PCI       string `json:"pci,omitempty"`
	Action    string `json:"action,omitempty"`
}

// Equal reports whether two states would be written identically.
func (s State) Equal(o State) bool {
	if (s.Drained == nil) != (o.Drained == nil) {
		return false
	}
	if s.Drained != nil && (*s.Drained != *o.Drained) {
		return false
	}
	return s.HealthyRuns == o.HealthyRuns && s.Foreign == o.Foreign && s.Suppressed == o.Suppressed &&
		maps.Equal(s.Last, o.Last)
}

// Clone returns a deep copy, so a decision can be compared with its input.
func (s State) Clone() State {
	c := s
	if s.Drained != nil {
		d := *s.Drained
		c.Drained = &d
	}
	c.Last = maps.Clone(s.Last)
	return c
}

// Store keeps the state as JSON in one file.
type Store struct {
	Path string
}

// NewStore returns node's store in dir. The file is named after the node,
// so a run by hand with --node for another node can neither resume that
// node on this node's record nor wipe this node's record.
func NewStore(dir, node string) Store {
	return Store{Path: filepath.Join(dir, "policy."+node+".json")}
}

// maxStateFile caps the policy state: a few hundred bytes when sound.
const maxStateFile = 1 << 20

// ErrCorrupt marks a state file that could not be parsed. The caller starts
// afresh: a broken file must not stop health checking, and forgetting a
// drain only means it will not be auto-resumed (the safe direction).
var ErrCorrupt = errors.New("corrupt state file")

// Load reads the state; a missing file is an empty state.
func (st Store) Load() (State, error) {
	b, err := sysread.Regular(st.Path, maxStateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, nil
	}
	if err != nil {
		return State{}, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, fmt.Errorf("%w %s: %v", ErrCorrupt, st.Path, err)
	}
	return s, nil
}

// Save writes the state atomically (temp file, fsync, rename), so a crash
// mid-write leaves the old state rather than a torn one.
func (st Store) Save(s State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	return atomicfile.Write(st.Path, append(b, '\n'), atomicfile.State(".policy-*.json"))
}
