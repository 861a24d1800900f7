package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Ping checks that slurmrestd accepts our credentials and reaches
// slurmctld; /openapi/v3 answers any token, so discovery alone cannot.
func (r *REST) Ping(ctx context.Context) error {
	return r.versioned(ctx, func(v apiVersions) error {
		req := request{method: "GET", path: "/slurm/" + v.read + "/ping/"}
		body, err := r.call(ctx, req)
		if err != nil {
			return err
		}
		if err := checkPings(body); err != nil {
			return r.explain(fmt.Errorf("slurmrestd %s %s: %w", req.method, req.path, err))
		}
		return nil
	})
}

// pingEntry is one controller of a ping answer. Each API version says
// "up" its own way (recorded):
//
//	v0.0.38 (22.05):           "ping":"UP", "status":0
//	v0.0.40-41 (24.11):        "pinged":"UP"
//	v0.0.42-44 (24.11, 26.05): "pinged":"UP", "responding":true
//	v0.0.45 (26.05):           "responding":true, "status":"No error", no "pinged"
//
// Pointers tell a missing field from a zero one. v0.0.45's status is the
// text of slurmctld's answer: "Protocol authentication error" for a
// refused token, "Unable to contact slurm controller (connect failure)"
// for a dead one (recorded); v0.0.38's is a number.
type pingEntry struct {
	Hostname   string          `json:"hostname"`
	Ping       *string         `json:"ping"`
	Pinged     *string         `json:"pinged"`
	Responding *bool           `json:"responding"`
	Status     json.RawMessage `json:"status"`
}

// authText is slurm_strerror(SLURM_PROTOCOL_AUTHENTICATION_ERROR), the
// status v0.0.45 gives a controller that refused our token (recorded).
const authText = "Protocol authentication error"

// why is v0.0.45's status text where it explains something, else "".
func (p pingEntry) why() string {
	var s string
	if json.Unmarshal(p.Status, &s) != nil || s == "No error" {
		return ""
	}
	return s
}

type pingResponse struct {
	Pings *[]pingEntry `json:"pings"`
}

var errNoPingState = errors.New("no ping, pinged or responding field")

// up reads one entry. Every field present must be well formed and agree
// with the others: an answer we cannot read is an error, never a guess.
func (p pingEntry) up() (bool, error) {
	var votes []bool
	for _, word := range []*string{p.Ping, p.Pinged} {
		if word == nil {
			continue
		}
		switch strings.ToUpper(*word) {
		case "UP":
			votes = append(votes, true)
		case "DOWN":
			votes = append(votes, false)
		default:
			return false, fmt.Errorf("ping state %q: want UP or DOWN", *word)
		}
	}
	if p.Responding != nil {
		votes = append(votes, *p.Responding)
	}
	if len(votes) == 0 {
		return false, errNoPingState
	}
	for _, v := range votes[1:] {
		if v != votes[0] {
			return false, fmt.Errorf("ping fields disagree (ping %s, pinged %s, responding %s)",
				strOrNone(p.Ping), strOrNone(p.Pinged), boolOrNone(p.Responding))
		}
	}
	return votes[0], nil
}

// checkPings wants some slurmctld up; a backup controller that answers is
// enough to drain through. 24.11 and 26.05 answer HTTP 200 with the
// controller down both when slurmctld is down and when it refuses our token
// (recorded). Only v0.0.45's status tells the two apart; where it says the
// token was refused, the error is ErrUnauthorized.
func checkPings(body []byte) error {
	var pr pingResponse
	if err := json.Unmarshal(body, &pr); err != nil {
		return fmt.Errorf("decode ping: %w", err)
	}
	if pr.Pings == nil || len(*pr.Pings) == 0 {
		return errors.New("ping answer lists no controller")
	}
	var seen []string
	anyUp, refused := false, false
	for i, p := range *pr.Pings {
		if p.Hostname == "" {
			return fmt.Errorf("ping entry %d has no hostname", i)
		}
		up, err := p.up()
		if err != nil {
			return fmt.Errorf("ping %s: %w", p.Hostname, err)
		}
		anyUp = anyUp || up
		st := p.Hostname + " " + upDown(up)
		if w := p.why(); w != "" {
			st += ": " + w
			refused = refused || (!up && w == authText)
		}
		seen = append(seen, st)
	}
	switch {
	case anyUp:
		return nil
	case refused:
		return fmt.Errorf("%w: no slurmctld UP (%s)", ErrUnauthorized, strings.Join(seen, ", "))
	}
	return fmt.Errorf("no slurmctld UP (%s); slurmctld is down or refused the token", strings.Join(seen, ", "))
}

func upDown(up bool) string {
	if up {
		return "UP"
	}
	return "DOWN"
}

func strOrNone(s *string) string {
	if s == nil {
		return "absent"
	}
	return fmt.Sprintf("%q", *s)
}

func boolOrNone(b *bool) string {
	if b == nil {
		return "absent"
	}
	return fmt.Sprint(*b)
}
