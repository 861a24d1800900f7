// Package slurm controls a node's drain state through slurmrestd or scontrol.
package slurm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Node is what gpuhc needs to know about a node to decide ownership.
type Node struct {
	Name string
	// State is the base state followed by flags, upper-case, as REST
	// v0.0.39+ reports it: ["IDLE","DRAIN"], ["DOWN","DRAIN","NOT_RESPONDING"].
	State      []string
	Reason     string
	ReasonUser string    // who set the reason; empty when unknown
	ReasonTime time.Time // zero when unknown
	// Weight is the node's scheduling weight (slurm.conf Weight=, default
	// 1; the scheduler picks the lowest first); 0 when Slurm reported none
	// that could be used (see SettingsErr).
	Weight uint32
	// Features are the node's available features and ActiveFeatures its
	// active ones, in Slurm's order; nil when it has none.
	Features, ActiveFeatures []string
	// SettingsErr says why Weight and the features could not be read (a
	// value out of range, a feature that is not a plain word); they are
	// then left unset. Drains do not depend on them, so such a node still
	// reads; only a change of its settings (Tuner) must refuse it.
	SettingsErr string
}

// Base is the base state (IDLE, ALLOCATED, MIXED, DOWN, ...).
func (n Node) Base() string {
	if len(n.State) == 0 {
		return ""
	}
	return n.State[0]
}

// Has reports whether the state carries flag (e.g. "DRAIN").
func (n Node) Has(flag string) bool {
	for _, s := range n.State {
		if s == flag {
			return true
		}
	}
	return false
}

// HasPrefix reports whether any state flag starts with prefix ("REBOOT_").
func (n Node) HasPrefix(prefix string) bool {
	for _, s := range n.State {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// Drained reports whether the node is drained or draining. Slurm reports
// the DRAIN flag for both; after a RESUME 24.11 keeps the old reason on an
// idle node, so ownership must look at this flag, not the reason alone.
func (n Node) Drained() bool { return n.Has("DRAIN") }

// Controller is one way of reading and changing node state.
type Controller interface {
	// Backend names the mechanism ("rest v0.0.42", "scontrol").
	Backend() string
	Node(ctx context.Context, name string) (Node, error)
	// Nodes lists every node of the cluster, for the storm guard's count
	// of nodes already drained. Only the drain path calls it.
	Nodes(ctx context.Context) ([]Node, error)
	// Drain sets DRAIN with reason. The reason must be non-empty.
	Drain(ctx context.Context, name, reason string) error
	// Resume clears DRAIN.
	Resume(ctx context.Context, name string) error
}

// Settings is a change of a node's scheduling settings, not of its state:
// nil fields are left as they are. Features and ActiveFeatures replace
// the whole list; Slurm requires the active ones to be available.
type Settings struct {
	Weight         *uint32
	Features       *[]string
	ActiveFeatures *[]string
}

// Tuner changes a node's scheduling settings (gpuhc-drain lemons
// --apply/--revert). Client, REST and Scontrol implement it; it is not
// part of Controller, which the health check, the prolog and the epilog
// use and which never needs it.
//
// Slurm keeps a Weight or features set this way only until slurmctld
// restarts without -R or reconfigures (scontrol reconfigure, SIGHUP
// aside): slurm.conf wins then.
type Tuner interface {
	Tune(ctx context.Context, name string, s Settings) error
}

// MaxWeight is the largest weight Slurm accepts: a uint32 below its
// NO_VAL and INFINITE markers.
const MaxWeight = 0xfffffffd

// CheckSettings refuses a change that is empty, out of range, or names a
// feature that is not a plain word (ValidFeature).
func CheckSettings(s Settings) error {
	if s.Weight == nil && s.Features == nil && s.ActiveFeatures == nil {
		return errors.New("node settings: nothing to change")
	}
	if s.Weight != nil && *s.Weight > MaxWeight {
		return fmt.Errorf("node settings: weight %d over %d", *s.Weight, MaxWeight)
	}
	for _, l := range []*[]string{s.Features, s.ActiveFeatures} {
		if l == nil {
			continue
		}
		for _, f := range *l {
			if err := ValidFeature(f); err != nil {
				return fmt.Errorf("node settings: %w", err)
			}
		}
	}
	return nil
}

// maxFeatureLen bounds one feature name.
const maxFeatureLen = 128

// ValidFeature accepts a feature made of [A-Za-z0-9_.:+@/-]: nothing
// that a feature expression (&|,*[]()!), scontrol's Key=Value parsing or a
// hostlist would read as something else.
func ValidFeature(f string) error {
	if f == "" || len(f) > maxFeatureLen {
		return fmt.Errorf("feature %q: length %d (1 to %d)", f, len(f), maxFeatureLen)
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		if nameByte(c) || strings.IndexByte(":+@/", c) >= 0 {
			continue
		}
		return fmt.Errorf("feature %q: byte %d is not one of [A-Za-z0-9_.:+@/-]", f, i)
	}
	return nil
}

// parseFeatures splits a comma-separated feature list as Slurm prints it;
// "" and "(null)" are none.
func parseFeatures(s string) ([]string, error) {
	if s == "" || s == "(null)" {
		return nil, nil
	}
	out := strings.Split(s, ",")
	for _, f := range out {
		if err := ValidFeature(f); err != nil {
			return nil, err
		}
	}
	return out, nil
}
