package slurm

import (
	"context"
	"errors"
)

// ErrNoRESTReboot: slurmrestd has no request for a node reboot
// (docs/remediation.md), so a reboot needs scontrol.
var ErrNoRESTReboot = errors.New("slurmrestd cannot ask for a reboot; it needs scontrol (slurm.backend auto or scontrol)")

// Reboot runs `scontrol reboot Reason=REASON NAME`: slurmctld has slurmd
// run its RebootProgram once the node is idle (gpuhc asks only for a node
// it drained that runs nothing). Neither ASAP nor a nextstate is given:
// 22.05 gives an ASAP reboot NextState=RESUME by itself, and a resumed
// node takes jobs before any check after the boot; without them the node
// comes back drained with our reason on 22.05, 24.11 and 26.05
// (measured), and gpuhc's post-boot runs resume it
// (docs/remediation.md#reboot).
func (s *Scontrol) Reboot(ctx context.Context, name, reason string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := checkReason(reason); err != nil {
		return err
	}
	_, err := s.run(ctx, "reboot", "Reason="+reason, name)
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
