package drainctl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// This file holds the lemon quarantine's decisions (docs/remediation.md):
// pure functions of the node as Slurm reports it, the last quarantine
// event of that node and the options, so that each case is a table test.

// Results of lemons --apply and --revert, per node.
const (
	resApplied        = "applied"
	resAlreadyApplied = "already-applied"
	resWouldApply     = "would-apply"
	resReverted       = "reverted"
	resWouldRevert    = "would-revert"
	resNotQuarantined = "not-quarantined"
)

// DefaultLemonWeight is the Weight --apply sets by default: far above
// slurm.conf's default of 1, so the scheduler fills every other node first.
const DefaultLemonWeight = 1000

// nodeSettings is what a quarantine changes on a node, written in the
// event log as "weight=1" or, when a feature is part of it,
// "weight=1 features=a,b active_features=a" (an empty list is "features=").
type nodeSettings struct {
	Weight uint32
	// HasFeatures: the features are part of it (--feature was given).
	HasFeatures bool
	Features    []string
	Active      []string
}

func (s nodeSettings) String() string {
	out := "weight=" + strconv.FormatUint(uint64(s.Weight), 10)
	if s.HasFeatures {
		out += " features=" + strings.Join(s.Features, ",") + " active_features=" + strings.Join(s.Active, ",")
	}
	return out
}

// parseSettings reads what String wrote; anything else is an error.
func parseSettings(s string) (nodeSettings, error) {
	var out nodeSettings
	seen := map[string]bool{}
	for _, tok := range strings.Fields(s) {
		k, v, ok := strings.Cut(tok, "=")
		if !ok || seen[k] {
			return nodeSettings{}, fmt.Errorf("settings %q: bad or repeated %q", s, tok)
		}
		seen[k] = true
		switch k {
		case "weight":
			w, err := strconv.ParseUint(v, 10, 32)
			if err != nil || w == 0 || w > slurm.MaxWeight {
				return nodeSettings{}, fmt.Errorf("settings %q: weight %q", s, v)
			}
			out.Weight = uint32(w)
		case "features", "active_features":
			l, err := featureList(v)
			if err != nil {
				return nodeSettings{}, fmt.Errorf("settings %q: %w", s, err)
			}
			out.HasFeatures = true
			if k == "features" {
				out.Features = l
			} else {
				out.Active = l
			}
		default:
			return nodeSettings{}, fmt.Errorf("settings %q: unknown key %q", s, k)
		}
	}
	if !seen["weight"] {
		return nodeSettings{}, fmt.Errorf("settings %q: no weight", s)
	}
	if seen["features"] != seen["active_features"] {
		return nodeSettings{}, fmt.Errorf("settings %q: features and active_features go together", s)
	}
	return out, nil
}

func featureList(v string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	l := strings.Split(v, ",")
	for _, f := range l {
		if err := slurm.ValidFeature(f); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// current is the node's settings as Slurm reports them.
func current(n slurm.Node, withFeatures bool) nodeSettings {
	s := nodeSettings{Weight: n.Weight}
	if withFeatures {
		s.HasFeatures, s.Features, s.Active = true, n.Features, n.ActiveFeatures
	}
	return s
}

// same compares what want covers (the features only when it has them),
// features as sets: Slurm may list them in another order.
func (s nodeSettings) same(want nodeSettings) bool {
	if s.Weight != want.Weight {
		return false
	}
	if !want.HasFeatures {
		return true
	}
	return sameSet(s.Features, want.Features) && sameSet(s.Active, want.Active)
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

// tune is the change that turns the node's settings into s.
func (s nodeSettings) tune() slurm.Settings {
	w := s.Weight
	t := slurm.Settings{Weight: &w}
	if s.HasFeatures {
		f, a := nonNil(s.Features), nonNil(s.Active)
		t.Features, t.ActiveFeatures = &f, &a
	}
	return t
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return slices.Clone(l)
}

// weightSpec is --weight: an absolute weight, or "+N" above the current.
type weightSpec struct {
	rel bool
	n   uint32
}

func parseWeightSpec(s string) (weightSpec, error) {
	rel := strings.HasPrefix(s, "+")
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "+"), 10, 32)
	if err != nil || v == 0 || v > slurm.MaxWeight {
		return weightSpec{}, usagef("--weight %q: want a weight from 1 to %d, or +N to add N", s, uint32(slurm.MaxWeight))
	}
	return weightSpec{rel: rel, n: uint32(v)}, nil
}

func (w weightSpec) String() string {
	if w.rel {
		return "+" + strconv.FormatUint(uint64(w.n), 10)
	}
	return strconv.FormatUint(uint64(w.n), 10)
}

// target is the weight a quarantine sets on a node of weight cur.
func (w weightSpec) target(cur uint32) uint32 {
	if !w.rel {
		return w.n
	}
	return uint32(min(uint64(cur)+uint64(w.n), slurm.MaxWeight))
}

// quarantine is what --apply sets and what it expects to find.
type quarantine struct {
	weight  weightSpec
	feature string // "" when no feature is added
	// base is the weight a node nobody changed has (slurm.conf's Weight,
	// default 1): any other weight an admin set, not to be changed
	// without force.
	base  uint32
	force bool
}

// decision is what apply or revert does to one node.
type decision struct {
	result   string // resApplied/resReverted when change is set
	detail   string
	change   bool
	original nodeSettings // the node's settings before
	applied  nodeSettings // what gpuhc sets
}

func refuse(format string, args ...any) decision {
	return decision{result: resRefused, detail: fmt.Sprintf(format, args...)}
}

// lastQuarantine is a node's latest quarantine event, nil when none.
func lastQuarantine(evs []events.Event, node string) *events.Event {
	var last *events.Event
	for i := range evs {
		ev := &evs[i]
		if ev.Node != node || (ev.Kind != events.KindQuarantineApplied && ev.Kind != events.KindQuarantineReverted) {
			continue
		}
		if last == nil || !ev.Time.Before(last.Time) {
			last = ev
		}
	}
	return last
}

func readable(n slurm.Node) error {
	switch {
	case n.SettingsErr != "":
		return fmt.Errorf("Slurm's weight and features for it are unusable: %s", n.SettingsErr)
	case n.Weight == 0:
		return fmt.Errorf("Slurm reported no weight for it")
	}
	return nil
}

func when(ev *events.Event) string {
	return fmt.Sprintf("%s by %s", stamp(ev.Time), ev.By)
}

// decideApply: quarantine n unless it already is, or its settings are
// not what gpuhc expects (an admin's, which only force overrides).
func decideApply(n slurm.Node, last *events.Event, q quarantine) decision {
	if err := readable(n); err != nil {
		return refuse("%v", err)
	}
	withFeature := q.feature != ""
	cur := current(n, withFeature)
	var orig nodeSettings
	switch {
	case last != nil && last.Kind == events.KindQuarantineApplied:
		app, err := parseSettings(last.Applied)
		if err != nil {
			return refuse("the quarantine recorded at %s is unreadable: %v", when(last), err)
		}
		if cur.same(app) && app.HasFeatures == withFeature {
			return decision{result: resAlreadyApplied, detail: "quarantined at " + when(last), original: cur, applied: cur}
		}
		if !q.force {
			return refuse("quarantined at %s with %s, now %s: changed since; --force quarantines it again", when(last), app, cur)
		}
		// The original stays the one from before the first quarantine:
		// that is what a revert must bring back.
		if orig, err = parseSettings(last.Original); err != nil || orig.HasFeatures != withFeature {
			orig = cur
		}
	default:
		expect := q.base
		if last != nil { // reverted: the weight gpuhc brought back
			if back, err := parseSettings(last.Applied); err == nil {
				expect = back.Weight
			}
		}
		if n.Weight != expect && !q.force {
			return refuse("weight %d is not %d (slurm.conf's, or what gpuhc last restored): set by an admin? --force quarantines it anyway", n.Weight, expect)
		}
		if withFeature && (slices.Contains(n.Features, q.feature) || slices.Contains(n.ActiveFeatures, q.feature)) && !q.force {
			return refuse("already has feature %s, not set by gpuhc; --force quarantines it anyway", q.feature)
		}
		orig = cur
	}
	app := nodeSettings{Weight: q.weight.target(orig.Weight)}
	if app.Weight <= orig.Weight && !withFeature {
		return refuse("weight %d is already at or above the quarantine's %s", orig.Weight, q.weight)
	}
	app.Weight = max(app.Weight, orig.Weight)
	if withFeature {
		app.HasFeatures = true
		app.Features = addFeature(orig.Features, q.feature)
		app.Active = addFeature(orig.Active, q.feature)
	}
	return decision{result: resApplied, change: true, original: orig, applied: app}
}

func addFeature(l []string, f string) []string {
	if slices.Contains(l, f) {
		return slices.Clone(l)
	}
	return append(slices.Clone(l), f)
}

// decideRevert: bring back the original of the node's quarantine, unless
// someone changed the node since gpuhc quarantined it (force only).
func decideRevert(n slurm.Node, last *events.Event, force bool) decision {
	if last == nil || last.Kind != events.KindQuarantineApplied {
		d := decision{result: resNotQuarantined, detail: "no quarantine recorded"}
		if last != nil {
			d.detail = "reverted at " + when(last)
		}
		return d
	}
	orig, err := parseSettings(last.Original)
	if err != nil {
		return refuse("the quarantine at %s has no usable original settings (%v): set them by hand", when(last), err)
	}
	app, err := parseSettings(last.Applied)
	if err != nil {
		return refuse("the quarantine at %s has no usable applied settings (%v)", when(last), err)
	}
	if err := readable(n); err != nil {
		return refuse("%v", err)
	}
	cur := current(n, app.HasFeatures || orig.HasFeatures)
	if !cur.same(app) && !force {
		return refuse("gpuhc set %s at %s, now %s: changed since; --force brings back %s", app, when(last), cur, orig)
	}
	return decision{result: resReverted, change: true, original: cur, applied: orig}
}
