package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
)

// Node reads one node.
func (r *REST) Node(ctx context.Context, name string) (Node, error) {
	if err := ValidateName(name); err != nil {
		return Node{}, err
	}
	var n Node
	err := r.versioned(ctx, func(v apiVersions) error {
		var err error
		n, err = r.node(ctx, v, name)
		return err
	})
	return n, err
}

func (r *REST) node(ctx context.Context, v apiVersions, name string) (Node, error) {
	req := request{method: "GET", path: nodePath(v.read, name)}
	body, err := r.call(ctx, req)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status < 300 {
		// 24.11 answers an unknown node with HTTP 200, no nodes and
		// "Failure to query node X" (error_number 0), recorded.
		ae.notFound = true
	}
	if err != nil {
		return Node{}, err
	}
	n, err := pickNode(body, name)
	if err != nil {
		return Node{}, fmt.Errorf("slurmrestd %s %s: %w", req.method, req.path, err)
	}
	return n, nil
}

// Nodes lists every node with GET /slurm/vX/nodes/ on the read version,
// which 22.05's v0.0.38 serves too.
func (r *REST) Nodes(ctx context.Context) ([]Node, error) {
	var ns []Node
	err := r.versioned(ctx, func(v apiVersions) error {
		req := request{method: "GET", path: "/slurm/" + v.read + "/nodes/", limit: maxListBody, list: true}
		body, err := r.call(ctx, req)
		if err != nil {
			return err
		}
		if ns, err = allNodes(body); err != nil {
			return fmt.Errorf("slurmrestd %s %s: %w", req.method, req.path, err)
		}
		return nil
	})
	return ns, err
}

// Drain sets DRAIN with reason.
func (r *REST) Drain(ctx context.Context, name, reason string) error {
	if err := checkReason(reason); err != nil {
		return err
	}
	return r.update(ctx, name, nodeUpdate{State: []string{"DRAIN"}, Reason: reason})
}

// Resume clears DRAIN.
func (r *REST) Resume(ctx context.Context, name string) error {
	return r.update(ctx, name, nodeUpdate{State: []string{"RESUME"}})
}

// Tune changes the node's weight and features with a node POST that sets
// no state: {"weight":{"set":true,"infinite":false,"number":N},
// "features":[...],"features_act":[...]} (update_node_msg in the
// v0.0.40-45 documents of 24.11 and 26.05; test/e2e/quarantine.sh sets and
// clears them through v0.0.42 on 24.11.5 and v0.0.45 on 26.05.5).
func (r *REST) Tune(ctx context.Context, name string, s Settings) error {
	if err := CheckSettings(s); err != nil {
		return err
	}
	u := settingsUpdate{Features: csvField(s.Features), ActiveFeatures: csvField(s.ActiveFeatures)}
	if s.Weight != nil {
		u.Weight = &restNumber{Set: true, Number: int64(*s.Weight)}
	}
	return r.post(ctx, name, u)
}

// settingsUpdate is Tune's POST body: only the fields to change.
type settingsUpdate struct {
	Weight         *restNumber `json:"weight,omitempty"`
	Features       *csvList    `json:"features,omitempty"`
	ActiveFeatures *csvList    `json:"features_act,omitempty"`
}

// csvList is a csv_string as a request sends it: an array, except that an
// empty list must be "" (26.05.5 and 24.11.5 take an empty array for
// "unchanged"; "" clears, as scontrol's Features= does; verified on both).
type csvList []string

func (c csvList) MarshalJSON() ([]byte, error) {
	if len(c) == 0 {
		return []byte(`""`), nil
	}
	return json.Marshal([]string(c))
}

func csvField(l *[]string) *csvList {
	if l == nil {
		return nil
	}
	c := csvList(*l)
	return &c
}

// restNumber is a {set,infinite,number} as a request sends it.
type restNumber struct {
	Set      bool  `json:"set"`
	Infinite bool  `json:"infinite"`
	Number   int64 `json:"number"`
}

// nodeUpdate is the POST body; v0.0.39+ take state as an array. It has
// no reason_uid (deprecated in 26.05's v0.0.42-45 update_node_msg):
// slurmctld records the token's user whatever the body says.
type nodeUpdate struct {
	State  []string `json:"state"`
	Reason string   `json:"reason,omitempty"`
}

func (r *REST) update(ctx context.Context, name string, u nodeUpdate) error {
	return r.post(ctx, name, u)
}

// post sends body u to the node on the write version.
func (r *REST) post(ctx context.Context, name string, u any) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	body, err := json.Marshal(u)
	if err != nil {
		return fmt.Errorf("encode node update: %w", err)
	}
	return r.versioned(ctx, func(v apiVersions) error {
		w, err := postVersion(v)
		if err != nil {
			return err
		}
		_, err = r.call(ctx, request{method: "POST", path: nodePath(w, name), body: body})
		return err
	})
}

// call is do plus the check that a 2xx body carries no errors: slurmrestd
// reports some failures in the errors array of a successful response.
func (r *REST) call(ctx context.Context, req request) ([]byte, error) {
	resp, err := r.do(ctx, req)
	if err != nil {
		return nil, err
	}
	var env restResponse
	if err := json.Unmarshal(resp.body, &env); err != nil {
		return nil, fmt.Errorf("slurmrestd %s %s: HTTP %d: decode response: %w", req.method, req.path, resp.status, err)
	}
	if len(env.Errors) > 0 {
		return nil, &APIError{Method: req.method, Path: req.path, Status: resp.status, Errors: env.Errors}
	}
	return resp.body, nil
}

func nodePath(version, name string) string {
	return "/slurm/" + version + "/node/" + url.PathEscape(name)
}
