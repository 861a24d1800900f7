package slurm

import (
	"fmt"
	"strings"
)

// checkReason refuses a reason Slurm would accept but we must not send:
// empty (an unexplained drain that nobody can attribute, which slurmrestd
// accepts: docs/architecture.md#slurmrestd) or with
// control characters (they would split the one-line `scontrol show node -o`
// output that every later run parses).
func checkReason(reason string) error {
	if strings.TrimSpace(reason) == "" {
		return ErrEmptyReason
	}
	for i, r := range reason {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("drain reason has a control character at byte %d", i)
		}
	}
	return nil
}
