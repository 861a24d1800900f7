package slurm

import (
	"context"
	"errors"
	"fmt"
)

// with runs op on the backend the mode calls for. In auto mode REST is
// tried first when configured and able to change nodes; if it fails, op
// runs again on scontrol and REST is not tried again by this Client, so a
// dead slurmrestd costs one round of retries per process, not per operation.
func (c *Client) with(ctx context.Context, what string, op func(Controller) error) error {
	switch c.mode {
	case BackendScontrol:
		return c.run(c.sc, op)
	case BackendREST:
		return c.run(c.rest, op)
	}
	if c.rest == nil || c.restDisabled() {
		return c.run(c.sc, op)
	}
	err := c.tryREST(ctx, op)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil || definite(err) {
		// No time left for scontrol, or a definite answer it would repeat.
		return err
	}
	c.disableREST()
	c.logFallback(what, err)
	if scErr := c.run(c.sc, op); scErr != nil {
		return fmt.Errorf("%w (after slurmrestd failed: %v)", scErr, err)
	}
	return nil
}

// definite: slurmctld's own answer, which scontrol would only repeat.
func definite(err error) bool {
	return errors.Is(err, ErrNodeNotFound) || errors.Is(err, ErrJobFinished) || errors.Is(err, ErrJobNotFound)
}

// tryREST makes sure REST can change nodes (auto must not read through a
// slurmrestd it cannot later drain through) and then runs op on it.
func (c *Client) tryREST(ctx context.Context, op func(Controller) error) error {
	if _, err := c.rest.writeVersion(ctx); err != nil {
		return err
	}
	return c.run(c.rest, op)
}

// logFallback: a slurmrestd too old to change nodes is expected on 22.05;
// anything else is a fault an admin should see.
func (c *Client) logFallback(what string, err error) {
	l := c.log.WithError(err).WithField("op", what)
	if errors.Is(err, ErrNoNodePost) {
		l.Info("slurmrestd cannot change nodes; using scontrol")
		return
	}
	l.Warn("slurmrestd failed; falling back to scontrol")
}

func (c *Client) run(ctl Controller, op func(Controller) error) error {
	err := op(ctl)
	c.mu.Lock()
	c.used = ctl.Backend()
	c.mu.Unlock()
	return err
}

func (c *Client) restDisabled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restDown
}

func (c *Client) disableREST() {
	c.mu.Lock()
	c.restDown = true
	c.mu.Unlock()
}
