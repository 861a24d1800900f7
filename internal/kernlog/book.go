package kernlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// Finding is what one rule made of one kernel line: a fault on a
// component. The rules of host.kernel and fabric.sxid both produce them;
// a Book turns them into results and episodes.
type Finding struct {
	// Rule names the row that matched ("aer_fatal", "sxid_20034"). With
	// Component it keys the episode: the same rule on the same component
	// is one problem however many lines it logs.
	Rule      string
	Component string
	Status    check.Status // Warn or Fail; other statuses are not reported
	Action    check.Action
	// Sticky FAILs are repeated by every run until the boot id changes.
	Sticky  bool
	Message string
	IDs     check.IDs
}

// Episode is one problem of this boot as the state file keeps it.
type Episode struct {
	Rule      string       `json:"rule"`
	Component string       `json:"component"`
	Status    check.Status `json:"status"`
	Action    check.Action `json:"action"`
	Sticky    bool         `json:"sticky,omitempty"`
	// Message is the first line's verdict for a FAIL (repeated word for
	// word), the latest for a WARN.
	Message string    `json:"message"`
	Count   int       `json:"count"` // matching lines this boot
	IDs     check.IDs `json:"ids"`
}

// State is a Book's record between runs. Episodes only live for one boot:
// a record of another boot id is dropped, which is what clears a sticky
// FAIL after a reboot.
type State struct {
	BootID string `json:"boot_id"`
	// Through is the sequence number after the last line judged this boot
	// (kmsg.Snapshot.Unjudged): lines read again are not counted again.
	Through  uint64              `json:"judged_through,omitempty"`
	Episodes map[string]*Episode `json:"episodes,omitempty"`
}

// Book runs one kernel-log rule set over a run's snapshot: it loads the
// rule set's state, hands the new lines to Judge, folds the findings into
// episodes, saves the state and tells the reader the lines were judged.
type Book struct {
	Check   string // the check's name, also the name given to Reader.Judged
	File    string // the state file, in Dir
	Dir     statefile.Dir
	Reader  kmsg.Reader
	Healthy string // the OK message of a run with nothing to report
}

// Run judges the snapshot with judge and returns the check's results: one
// per component with a fault (the worst of its episodes), else one OK for
// the host.
//
//   - Snapshot.Err: ERROR for the host, and the boot's sticky FAILs
//     again; nothing is saved and Judged is not called.
//   - Snapshot.Fresh: OK with kmsg.Started, unless this boot already has
//     sticky FAILs (a cursor lost in the middle of a boot must not
//     resume a node gpuhc knows is broken).
//   - The state cannot be saved: ERROR, and Judged is not called, so the
//     lines come again next run rather than be lost with their FAIL.
func (b Book) Run(ctx context.Context, judge func([]kmsg.Line) []Finding) []check.Result {
	snap := b.Reader.Snapshot(ctx)
	st, loaded, loadErr := b.load(snap)
	var problems []string
	if snap.Trouble != "" {
		problems = append(problems, snap.Trouble)
	}
	if loadErr != nil {
		problems = append(problems, fmt.Sprintf("cannot read %s, starting afresh: %v", b.File, loadErr))
	}
	if snap.Err != nil {
		problems = append(problems, fmt.Sprintf("cannot read the kernel log: %v", snap.Err))
		return withProblems(problems, st.results(nil, b.Healthy))
	}
	touched := map[string]bool{}
	if !snap.Fresh {
		lines := snap.Unjudged(st.Through)
		for _, f := range judge(lines) {
			if f.Status == check.Warn || f.Status == check.Fail {
				touched[st.add(f)] = true
			}
		}
		st.Through = kmsg.Mark(lines, st.Through)
	}
	healthy := b.Healthy
	if snap.Fresh {
		healthy = kmsg.Started
	}
	results := st.results(touched, healthy)
	if err := b.Dir.SaveChanged(b.File, st, loaded); err != nil {
		problems = append(problems, fmt.Sprintf("cannot save %s, these lines will be judged again: %v", b.File, err))
		return withProblems(problems, results)
	}
	b.Reader.Judged(b.Check)
	return withProblems(problems, results)
}

// load reads the state for snap's boot. A corrupt record, or one of
// another boot, starts afresh; a snapshot without a boot id keeps what is
// saved (it cannot tell a reboot), unless the log restarted below the
// cursor, which without a boot id means a reboot.
func (b Book) load(snap kmsg.Snapshot) (st *State, loaded []byte, err error) {
	boot := snap.BootID
	var raw json.RawMessage
	err = b.Dir.Load(b.File, &raw)
	fresh := &State{BootID: boot, Episodes: map[string]*Episode{}}
	if err != nil && !errors.Is(err, statefile.ErrCorrupt) {
		return fresh, nil, err
	}
	var saved State
	if err != nil || raw == nil || json.Unmarshal(raw, &saved) != nil {
		return fresh, nil, nil
	}
	// What SaveChanged compares with: the record as it is on disk.
	loaded = statefile.Encode(&saved)
	if (boot != "" && saved.BootID != boot) || (boot == "" && snap.Restarted) {
		return fresh, loaded, nil
	}
	if saved.Episodes == nil {
		saved.Episodes = map[string]*Episode{}
	}
	if boot != "" {
		saved.BootID = boot
	}
	return &saved, loaded, nil
}

// add folds one finding into its episode and returns the episode's key.
// A sticky FAIL keeps its first message; anything else takes the newest.
// The episode's verdict is the worse of what it had and the finding's.
func (s *State) add(f Finding) string {
	key := f.Rule + "|" + f.Component
	e := s.Episodes[key]
	if e == nil {
		e = &Episode{Rule: f.Rule, Component: f.Component}
		s.Episodes[key] = e
	}
	e.Count++
	keep := e.Status == check.Fail && e.Sticky && !worse(f.Status, f.Action, e.Status, e.Action)
	if !keep {
		e.Message = f.Message
	}
	if e.Count == 1 || worse(f.Status, f.Action, e.Status, e.Action) {
		e.Status, e.Action, e.Sticky = f.Status, f.Action, f.Sticky
	}
	if f.IDs != (check.IDs{}) {
		e.IDs = f.IDs
	}
	return key
}

// results lists one result per component: episodes touched by this run,
// and the sticky FAILs of the boot. Untouched WARNs and non-sticky FAILs
// are over (their run reported them); they stay in the state only for the
// count.
func (s *State) results(touched map[string]bool, healthy string) []check.Result {
	byComp := map[string][]*Episode{}
	keys := make([]string, 0, len(s.Episodes))
	for k := range s.Episodes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := s.Episodes[k]
		live := touched[k] || (e.Status == check.Fail && e.Sticky)
		if live {
			byComp[e.Component] = append(byComp[e.Component], e)
		}
	}
	comps := make([]string, 0, len(byComp))
	for c := range byComp {
		comps = append(comps, c)
	}
	sort.Strings(comps)
	var out []check.Result
	for _, c := range comps {
		out = append(out, merge(byComp[c]))
	}
	if len(out) == 0 && touched != nil {
		out = append(out, check.Result{Component: "host", Status: check.OK, Action: check.ActionNone, Message: healthy})
	}
	return out
}

// merge is a component's result: its worst episode, naming the others.
func merge(eps []*Episode) check.Result {
	w := eps[0]
	for _, e := range eps[1:] {
		if worse(e.Status, e.Action, w.Status, w.Action) {
			w = e
		}
	}
	msg := fmt.Sprintf("%s (%d this boot)", w.Message, w.Count)
	var others []string
	for _, e := range eps {
		if e != w {
			others = append(others, e.Rule)
		}
	}
	if len(others) > 0 {
		msg += "; also " + strings.Join(others, ", ")
	}
	return check.Result{Component: w.Component, Status: w.Status, Action: w.Action, Message: msg, IDs: w.IDs}
}

// actionRank orders actions by how much they take out of service.
var actionRank = map[check.Action]int{
	check.ActionNone: 0, check.ActionDrainAfterJob: 1, check.ActionDrain: 2,
	check.ActionResetGPU: 3, check.ActionReboot: 4, check.ActionRMA: 5,
}

func worse(s check.Status, a check.Action, than check.Status, thanA check.Action) bool {
	if s != than {
		return s > than
	}
	return actionRank[a] > actionRank[thanA]
}

// withProblems puts the host's ERROR first, in place of its OK: one
// result per component.
func withProblems(problems []string, results []check.Result) []check.Result {
	if len(problems) == 0 {
		return results
	}
	out := []check.Result{{Component: "host", Status: check.Error, Action: check.ActionNone, Message: strings.Join(problems, "; ")}}
	for _, r := range results {
		if r.Component != "host" || r.Status > check.OK {
			out = append(out, r)
		}
	}
	return out
}
