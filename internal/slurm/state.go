package slurm

import (
	"fmt"
	"strings"
)

// baseStates are Slurm's base node states (node_states[] in
// slurm_protocol_defs.c); everything else in a state list is a flag.
var baseStates = map[string]bool{
	"UNKNOWN": true, "DOWN": true, "IDLE": true, "ALLOCATED": true,
	"ERROR": true, "MIXED": true, "FUTURE": true,
}

// normalizeState upper-cases the parts, moves the one base state first and
// keeps the flags in Slurm's order. Exactly one base state is required:
// ownership decisions read Base(), and a guessed base would be a wrong Node.
func normalizeState(parts []string) ([]string, error) {
	out := make([]string, 0, len(parts))
	base := ""
	for _, p := range parts {
		p = strings.ToUpper(strings.TrimSpace(p))
		if !stateWord(p) {
			return nil, fmt.Errorf("bad node state word %q", p)
		}
		if baseStates[p] {
			if base != "" {
				return nil, fmt.Errorf("two base states %s and %s", base, p)
			}
			base = p
			continue
		}
		out = append(out, p)
	}
	if base == "" {
		return nil, fmt.Errorf("no base state in %q", parts)
	}
	return append([]string{base}, out...), nil
}

func stateWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
