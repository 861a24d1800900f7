package slurm

import (
	"context"
	"errors"
)

// ErrNoRESTReboot: slurmrestd has no request for a node reboot
// (docs/remediation.md), so a reboot needs scontrol.
var ErrNoRESTReboot = errors.New("slurmrestd cannot ask for a reboot; it needs scontrol (slurm.backend auto or scontrol)")

// Reboot runs `scontrol reboot ASAP Reason=REASON NAME`: slurmctld drains
// the node (it is drained already when gpuhc asks), and has slurmd run its
// RebootProgram once the node is idle. No nextstate is given: the node
// comes back still drained with our reason, and gpuhc's own post-boot
// runs resume it (docs/remediation.md#reboot).
func (s *Scontrol) Reboot(ctx context.Context, name, reason string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := checkReason(reason); err != nil {
		return err
	}
	_, err := s.run(ctx, "reboot", "ASAP", "Reason="+reason, name)
	return err
}

// Reboot asks Slurm to reboot name when idle. It goes through scontrol
// whatever the backend (auto included): slurmrestd cannot express it.
func (c *Client) Reboot(ctx context.Context, name, reason string) error {
	if c.sc == nil {
		return ErrNoRESTReboot
	}
	return c.run(c.sc, func(Controller) error { return c.sc.Reboot(ctx, name, reason) })
}
