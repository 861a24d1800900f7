package slurm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// This file absorbs slurmrestd's schema drift between API versions
// (docs/architecture.md#slurmrestd) so the rest of the package sees one shape.

// stateList is a node state as v0.0.39+ sends it (["IDLE","DRAIN"]) or as
// v0.0.38 does ("idle", with flags in a separate state_flags array).
type stateList []string

func (s *stateList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*s = nil
		return nil
	case len(b) > 0 && b[0] == '"':
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		// Some writers join flags with '+' as scontrol does; split them.
		*s = strings.FieldsFunc(one, func(r rune) bool { return r == '+' })
		return nil
	case len(b) > 0 && b[0] == '[':
		var many []string
		if err := json.Unmarshal(b, &many); err != nil {
			return fmt.Errorf("node state: %w", err)
		}
		*s = many
		return nil
	}
	return fmt.Errorf("node state: want a string or an array, got %.20s", b)
}

// timestamp is a Unix time as ≤ v0.0.39 sends it (a plain integer) or as
// v0.0.40+ does ({"set":true,"infinite":false,"number":N}). Unset, infinite
// and zero all mean "unknown" and give the zero time.
type timestamp struct{ time.Time }

type slurmNumber struct {
	Set      *bool  `json:"set"`
	Infinite bool   `json:"infinite"`
	Number   *int64 `json:"number"`
}

func (t *timestamp) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	t.Time = time.Time{}
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return nil
	}
	var sec int64
	if b[0] == '{' {
		var n slurmNumber
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("timestamp: %w", err)
		}
		if n.Set == nil || n.Number == nil {
			return fmt.Errorf("timestamp: object without set/number: %.60s", b)
		}
		if !*n.Set || n.Infinite {
			return nil
		}
		sec = *n.Number
	} else if err := json.Unmarshal(b, &sec); err != nil {
		return fmt.Errorf("timestamp: want an integer or a {set,infinite,number} object: %w", err)
	}
	if sec < 0 {
		return fmt.Errorf("timestamp: negative %d", sec)
	}
	if sec > 0 {
		t.Time = time.Unix(sec, 0)
	}
	return nil
}

// restNode holds the node fields gpuhc reads, for every API version.
type restNode struct {
	Name            string    `json:"name"`
	State           stateList `json:"state"`
	StateFlags      []string  `json:"state_flags"` // v0.0.38 only
	Reason          string    `json:"reason"`
	ReasonSetByUser string    `json:"reason_set_by_user"`
	ReasonChangedAt timestamp `json:"reason_changed_at"`
	// Weight and the features are read apart (settings): an odd value
	// there must not cost a node its drain.
	Weight         json.RawMessage `json:"weight"`
	Features       json.RawMessage `json:"features"`
	ActiveFeatures json.RawMessage `json:"active_features"`
}

// restMeta's "slurm" also matches v0.0.38/39's "Slurm": encoding/json
// matches keys case-insensitively.
type restMeta struct {
	Plugin struct {
		Name string `json:"name"`
	} `json:"plugin"`
	Slurm struct {
		Release string `json:"release"`
	} `json:"slurm"`
}

// restResponse is the envelope every slurmrestd answer shares.
type restResponse struct {
	Meta   restMeta    `json:"meta"`
	Errors []RESTError `json:"errors"`
}

type nodesResponse struct {
	restResponse
	Nodes []restNode `json:"nodes"`
}

// toNode validates a REST node and converts it.
func (r restNode) toNode() (Node, error) {
	parts := append(append([]string(nil), r.State...), r.StateFlags...)
	state, err := normalizeState(parts)
	if err != nil {
		return Node{}, fmt.Errorf("node %q: %w", r.Name, err)
	}
	n := Node{Name: r.Name, State: state, Reason: r.Reason}
	// 24.11 reports reason_set_by_user "root" on nodes that never had a
	// reason (recorded); who set no reason is not worth reporting.
	if r.Reason != "" {
		n.ReasonUser, n.ReasonTime = r.ReasonSetByUser, r.ReasonChangedAt.Time
	}
	if err := r.settings(&n); err != nil {
		n.Weight, n.Features, n.ActiveFeatures = 0, nil, nil
		n.SettingsErr = err.Error()
	}
	return n, nil
}

// settings reads weight (an integer, or v0.0.40+'s {set,infinite,number}
// where a request body needs one; recorded answers send an integer) and
// the features: a comma-separated string on v0.0.38, an array since.
func (r restNode) settings(n *Node) error {
	w, err := restWeight(r.Weight)
	if err != nil {
		return err
	}
	n.Weight = w
	if n.Features, err = restFeatures(r.Features); err != nil {
		return fmt.Errorf("features: %w", err)
	}
	if n.ActiveFeatures, err = restFeatures(r.ActiveFeatures); err != nil {
		return fmt.Errorf("active_features: %w", err)
	}
	return nil
}

func restWeight(b json.RawMessage) (uint32, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return 0, nil
	}
	var v int64
	if b[0] == '{' {
		var num slurmNumber
		if err := json.Unmarshal(b, &num); err != nil {
			return 0, fmt.Errorf("weight: %w", err)
		}
		if num.Set == nil || !*num.Set || num.Infinite || num.Number == nil {
			return 0, nil
		}
		v = *num.Number
	} else if err := json.Unmarshal(b, &v); err != nil {
		return 0, fmt.Errorf("weight: want an integer: %w", err)
	}
	if v < 0 || v > MaxWeight {
		return 0, fmt.Errorf("weight %d out of range", v)
	}
	return uint32(v), nil
}

func restFeatures(b json.RawMessage) ([]string, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return nil, nil
	}
	if b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return nil, err
		}
		return parseFeatures(one)
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return nil, fmt.Errorf("want a string or an array of strings: %w", err)
	}
	for _, f := range many {
		if err := ValidFeature(f); err != nil {
			return nil, err
		}
	}
	if len(many) == 0 {
		return nil, nil
	}
	return many, nil
}

// pickNode finds name in a node list response and converts it.
func pickNode(body []byte, name string) (Node, error) {
	var resp nodesResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return Node{}, fmt.Errorf("decode nodes: %w", err)
	}
	for _, rn := range resp.Nodes {
		if rn.Name == name {
			return rn.toNode()
		}
	}
	return Node{}, fmt.Errorf("%w: %s (response has %d nodes)", ErrNodeNotFound, name, len(resp.Nodes))
}

// allNodes converts a whole node list. One node that cannot be read fails
// the list: a count that silently skipped nodes would be wrong, and the
// caller (the storm guard) must then not act on it.
func allNodes(body []byte) ([]Node, error) {
	var resp nodesResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("decode nodes: %w", err)
	}
	if len(resp.Nodes) == 0 {
		return nil, errors.New("no nodes in the answer")
	}
	out := make([]Node, 0, len(resp.Nodes))
	seen := make(map[string]bool, len(resp.Nodes))
	for _, rn := range resp.Nodes {
		n, err := rn.toNode()
		if err != nil {
			return nil, err
		}
		if err := addListed(seen, n.Name); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// addListed refuses an unnamed or repeated node in a list, either of which
// would make a count wrong.
func addListed(seen map[string]bool, name string) error {
	if name == "" {
		return errors.New("a node without a name")
	}
	if seen[name] {
		return fmt.Errorf("node %q listed twice", name)
	}
	seen[name] = true
	return nil
}
