// Package slurm controls a node's drain state through slurmrestd or scontrol.
package slurm

import (
	"context"
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
