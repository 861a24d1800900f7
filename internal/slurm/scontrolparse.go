package slurm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/lazyre"
)

// scontrolTime is slurm_make_time_str's default (no SLURM_TIME_FORMAT).
const scontrolTime = "2006-01-02T15:04:05"

// reasonEnd matches the " [user@time]" scontrol appends to the first line
// of a reason, when it is followed by the end of the line or by one of the
// keys slurm_sprint_node_table prints after Reason. Anchoring on what
// follows keeps a reason that itself contains "[x@y]" or "Key=v" whole.
var reasonEnd = lazyre.New(`^ \[([^\s\[\]@]+)@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\](?:$| (?:Comment|Extra|InstanceId|InstanceType|ReservationName)=)`)

// afterReason is where a reason without the [user@time] suffix ends.
var afterReason = lazyre.New(` (?:Comment|Extra|InstanceId|InstanceType|ReservationName)=`)

// parseShowNode reads `scontrol -o show node NAME`: one line of Key=Value
// pairs where only a few values (OS, Reason, Comment, Extra) hold spaces.
// Reason comes after every fixed field, so the line is split there first.
func parseShowNode(out []byte, name string, loc *time.Location) (Node, error) {
	line, err := nodeLine(string(out))
	if err != nil {
		return Node{}, err
	}
	n, err := parseNodeLine(line, loc)
	if err != nil {
		return Node{}, err
	}
	if n.Name != name {
		return Node{}, fmt.Errorf("output is for node %q, want %q", n.Name, name)
	}
	return n, nil
}

// parseShowNodes reads `scontrol -o show nodes`: one line per node, each
// read as parseShowNode reads its one line. A line that does not start
// with NodeName= continues the previous one: it can only come from a
// reason holding a newline (slurmctld stores what an admin typed), and
// refusing the whole list for it would stop every drain in the cluster.
func parseShowNodes(out []byte, loc *time.Location) ([]Node, error) {
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimRight(l, "\r ")
		switch {
		case l == "":
		case strings.HasPrefix(l, "NodeName="):
			lines = append(lines, l)
		case len(lines) == 0:
			return nil, fmt.Errorf("output does not start with NodeName=: %.80q", l)
		default:
			lines[len(lines)-1] += " " + l
		}
	}
	if len(lines) == 0 {
		return nil, errors.New("no nodes in the output")
	}
	nodes := make([]Node, 0, len(lines))
	seen := make(map[string]bool, len(lines))
	for _, l := range lines {
		n, err := parseNodeLine(l, loc)
		if err != nil {
			return nil, err
		}
		if err := addListed(seen, n.Name); err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// parseNodeLine reads one NodeName= line.
func parseNodeLine(line string, loc *time.Location) (Node, error) {
	head, reason, hasReason := splitReason(line)
	fields := headFields(head)
	name := fields["NodeName"]
	if name == "" {
		return Node{}, fmt.Errorf("no NodeName= in %.80q", line)
	}
	stateStr, ok := fields["State"]
	if !ok {
		return Node{}, fmt.Errorf("node %q: no State= in output", name)
	}
	state, err := normalizeState(strings.Split(stateStr, "+"))
	if err != nil {
		return Node{}, fmt.Errorf("node %q: %w", name, err)
	}
	n := Node{Name: name, State: state}
	if err := showSettings(fields, &n); err != nil {
		n.Weight, n.Features, n.ActiveFeatures = 0, nil, nil
		n.SettingsErr = err.Error()
	}
	if hasReason {
		if err := parseReason(reason, loc, &n); err != nil {
			return Node{}, fmt.Errorf("node %q: %w", name, err)
		}
	}
	return n, nil
}

// nodeLine is the single NodeName= line; anything else is an error, since
// a partial or mixed answer must not become a Node.
func nodeLine(out string) (string, error) {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimRight(l, "\r "); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		return "", fmt.Errorf("want one line of output, got %d", len(lines))
	}
	if !strings.HasPrefix(lines[0], "NodeName=") {
		return "", fmt.Errorf("output does not start with NodeName=: %.80q", lines[0])
	}
	return lines[0], nil
}

// splitReason cuts the line at " Reason=". The search starts after
// CurrentWatts=, the last fixed field, so an OS string cannot fool it.
func splitReason(line string) (head, rest string, ok bool) {
	from := strings.Index(line, " CurrentWatts=")
	if from < 0 {
		from = 0
	}
	i := strings.Index(line[from:], " Reason=")
	if i < 0 {
		return line, "", false
	}
	i += from
	return line[:i], line[i+len(" Reason="):], true
}

// headFields maps each Key=Value token before Reason. Tokens without '='
// continue a value with spaces (OS=Linux 6.1 #1 SMP) and are skipped; a
// repeated key is kept empty so it cannot be trusted.
func headFields(head string) map[string]string {
	m := map[string]string{}
	seen := map[string]int{}
	for _, tok := range strings.Fields(head) {
		k, v, ok := strings.Cut(tok, "=")
		if !ok || k == "" {
			continue
		}
		seen[k]++
		m[k] = v
		if seen[k] > 1 {
			m[k] = ""
		}
	}
	return m
}

// parseReason fills Reason, ReasonUser and ReasonTime from what follows
// "Reason=": "text [user@2025-01-02T03:04:05] Comment=...".
func parseReason(rest string, loc *time.Location, n *Node) error {
	for i := 0; i < len(rest); i++ {
		if rest[i] != ' ' {
			continue
		}
		m := reasonEnd.FindStringSubmatch(rest[i:])
		if m == nil {
			continue
		}
		t, err := time.ParseInLocation(scontrolTime, m[2], loc)
		if err != nil {
			return fmt.Errorf("reason time %q: %w", m[2], err)
		}
		if t.Unix() <= 0 { // no drain predates the epoch: not a time Slurm set
			return fmt.Errorf("reason time %q is before 1970", m[2])
		}
		n.Reason, n.ReasonUser, n.ReasonTime = rest[:i], m[1], t
		return nil
	}
	// No [user@time]: Slurm prints none when the reason time is unset.
	if end := afterReason.FindStringIndex(rest); end != nil {
		rest = rest[:end[0]]
	}
	n.Reason = rest
	return nil
}

// showSettings reads Weight=, AvailableFeatures= and ActiveFeatures=
// ("(null)" when none). A missing Weight= leaves 0 (unknown).
func showSettings(fields map[string]string, n *Node) error {
	if w, ok := fields["Weight"]; ok {
		v, err := strconv.ParseUint(w, 10, 32)
		if err != nil || v > MaxWeight {
			return fmt.Errorf("Weight=%q: not a weight", w)
		}
		n.Weight = uint32(v)
	}
	var err error
	if n.Features, err = parseFeatures(fields["AvailableFeatures"]); err != nil {
		return fmt.Errorf("AvailableFeatures: %w", err)
	}
	if n.ActiveFeatures, err = parseFeatures(fields["ActiveFeatures"]); err != nil {
		return fmt.Errorf("ActiveFeatures: %w", err)
	}
	return nil
}
