// Package escalate remembers, across reboots, in which boots a problem
// was seen on a part (a GPU by its serial), so that a problem that a
// reboot did not cure can ask for more than another reboot: the same
// XID on the same GPU in a third boot is an RMA, not a third reset.
//
// The record is one small JSON file in the state directory, bounded in
// size (see the Max constants), and written only when a problem is seen
// in a boot it was not yet recorded for: never on the healthy path, and
// once per boot for a problem repeated every run.
package escalate

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gpuhc/gpuhc/internal/statefile"
)

// Bounds on the record. A part's oldest boots, a part's least recently
// seen problems and the least recently seen parts go first.
const (
	MaxBoots    = 16 // per problem of a part
	MaxProblems = 16 // per part
	MaxParts    = 64 // a node has 8 GPUs; parts moved away leave stale entries
)

// History is one record of parts, problems and boots.
type History struct {
	dir  statefile.Dir
	name string
}

// New keeps its record as name in dir (never written when dir is
// ReadOnly, as in a dry run).
func New(dir statefile.Dir, name string) History { return History{dir: dir, name: name} }

type record struct {
	// Clock orders updates, for eviction; it counts writes, not time,
	// so that a wrong clock cannot evict the wrong part.
	Clock uint64           `json:"clock"`
	Parts map[string]*part `json:"parts"`
}

type part struct {
	Last     uint64              `json:"last"`
	Problems map[string]*problem `json:"problems"`
}

type problem struct {
	Last uint64 `json:"last"`
	// Boots are the episodes the problem was seen in, oldest first: boot
	// ids for a check's own escalation, remediation ids for
	// remediation's (Record).
	Boots []string `json:"boots"`
	// At is when each episode happened, where it matters (Record): zero
	// for boots. Shorter than Boots in records written before it existed.
	At []time.Time `json:"at,omitempty"`
}

// Seen records that problem was seen on part in boot, and returns the
// number of boots it has been seen in, this one included. An empty
// part or boot (a GPU without a serial, a kernel without a boot id) is
// not recorded: 0. A record that cannot be read is an error (1 is still
// returned: this boot saw it); a corrupt one starts afresh.
func (h History) Seen(part, problem, boot string) (int, error) {
	return h.Record(part, problem, boot, time.Time{})
}

// Record is Seen for an episode that happened at a time, which Since
// counts: remediation records each remediation of a check on a part, so
// that what the remediations did not cure escalates to rma by the same
// record and bounds as a check's problem seen across boots.
func (h History) Record(part, problem, episode string, at time.Time) (int, error) {
	boot := episode
	if part == "" || problem == "" || boot == "" {
		return 0, nil
	}
	rec := record{}
	if err := h.dir.Load(h.name, &rec); err != nil && !errors.Is(err, statefile.ErrCorrupt) {
		return 1, fmt.Errorf("escalation history: %w", err)
	}
	p := rec.problem(part, problem)
	if slices.Contains(p.Boots, boot) {
		return len(p.Boots), nil
	}
	rec.Clock++
	p.Last = rec.Clock
	rec.Parts[part].Last = rec.Clock
	for len(p.At) < len(p.Boots) {
		p.At = append(p.At, time.Time{})
	}
	p.Boots = append(p.Boots, boot)
	p.At = append(p.At[:len(p.Boots)-1], at.UTC())
	if len(p.Boots) > MaxBoots {
		p.Boots = slices.Clone(p.Boots[len(p.Boots)-MaxBoots:])
		p.At = slices.Clone(p.At[len(p.At)-MaxBoots:])
	}
	rec.trim()
	if err := h.dir.Save(h.name, rec); err != nil {
		return len(p.Boots), fmt.Errorf("escalation history: %w", err)
	}
	return len(p.Boots), nil
}

// Boots is how many boots problem has been seen in on part, from the
// record as it is (nothing is written).
func (h History) Boots(part, problem string) (int, error) {
	rec := record{}
	if err := h.dir.Load(h.name, &rec); err != nil && !errors.Is(err, statefile.ErrCorrupt) {
		return 0, fmt.Errorf("escalation history: %w", err)
	}
	if pt := rec.Parts[part]; pt != nil && pt.Problems[problem] != nil {
		return len(pt.Problems[problem].Boots), nil
	}
	return 0, nil
}

// Since is how many episodes Record recorded for problem on part at or
// after since (nothing is written). Episodes without a time (boots) are
// not counted.
func (h History) Since(part, problem string, since time.Time) (int, error) {
	rec := record{}
	if err := h.dir.Load(h.name, &rec); err != nil && !errors.Is(err, statefile.ErrCorrupt) {
		return 0, fmt.Errorf("escalation history: %w", err)
	}
	pt := rec.Parts[part]
	if pt == nil || pt.Problems[problem] == nil {
		return 0, nil
	}
	n := 0
	for _, at := range pt.Problems[problem].At {
		if !at.IsZero() && !at.Before(since) {
			n++
		}
	}
	return n, nil
}

func (r *record) problem(name, prob string) *problem {
	if r.Parts == nil {
		r.Parts = map[string]*part{}
	}
	pt := r.Parts[name]
	if pt == nil {
		pt = &part{}
		r.Parts[name] = pt
	}
	if pt.Problems == nil {
		pt.Problems = map[string]*problem{}
	}
	p := pt.Problems[prob]
	if p == nil {
		p = &problem{}
		pt.Problems[prob] = p
	}
	return p
}

// trim drops the least recently updated entries beyond the bounds.
func (r *record) trim() {
	for len(r.Parts) > MaxParts {
		delete(r.Parts, oldest(r.Parts, func(p *part) uint64 { return p.Last }))
	}
	for _, pt := range r.Parts {
		for len(pt.Problems) > MaxProblems {
			delete(pt.Problems, oldest(pt.Problems, func(p *problem) uint64 { return p.Last }))
		}
	}
}

// oldest is the key whose entry was updated first (ties: the lower key,
// so that the choice does not depend on map order).
func oldest[V any](m map[string]V, last func(V) uint64) string {
	var key string
	var at uint64
	for k, v := range m {
		if l := last(v); key == "" || l < at || (l == at && k < key) {
			key, at = k, l
		}
	}
	return key
}
