package slurm

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/config"
)

// Backend choices in config.Slurm.Backend.
const (
	BackendAuto     = "auto"
	BackendREST     = "rest"
	BackendScontrol = "scontrol"
)

// Client is the Controller gpuhc uses: it picks slurmrestd or scontrol per
// config.Slurm, and in auto mode falls back to scontrol when REST cannot
// do the job. Constructing one contacts nothing and runs nothing; a
// healthy node that never asks makes zero Slurm calls.
type Client struct {
	mode  string
	rest  *REST     // nil when REST is not configured
	sc    *Scontrol // nil in rest mode
	log   logrus.FieldLogger
	calls *Counter

	mu       sync.Mutex
	restDown bool   // auto: REST failed once; scontrol from now on
	used     string // what served the last operation
}

var (
	_ Controller = (*Client)(nil)
	_ Tuner      = (*Client)(nil)
	_ Tuner      = (*REST)(nil)
	_ Tuner      = (*Scontrol)(nil)
)

// New builds the Controller described by cfg. It validates cfg but does no
// I/O: discovery, the token file and scontrol wait for the first operation.
func New(cfg config.Slurm, opts ...Option) (*Client, error) {
	o := buildOptions(opts)
	opts = append(opts, WithCounter(o.counter)) // one count for both backends
	mode := cfg.Backend
	if mode == "" {
		mode = BackendAuto
	}
	c := &Client{mode: mode, log: o.log, calls: o.counter}
	var err error
	switch mode {
	case BackendScontrol:
		c.sc, err = NewScontrol(cfg.Scontrol, cfg.Timeout.Duration, opts...)
	case BackendREST:
		if cfg.URL == "" {
			return nil, errors.New("slurm backend rest needs slurm.url")
		}
		c.rest, err = newRESTFromConfig(cfg, opts)
	case BackendAuto:
		err = c.buildAuto(cfg, opts)
	default:
		return nil, fmt.Errorf("slurm backend %q: want auto, rest or scontrol", cfg.Backend)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Client) buildAuto(cfg config.Slurm, opts []Option) error {
	var err error
	if c.sc, err = NewScontrol(cfg.Scontrol, cfg.Timeout.Duration, opts...); err != nil {
		return err
	}
	if cfg.URL == "" {
		return nil
	}
	if c.rest, err = newRESTFromConfig(cfg, opts); err != nil {
		// A REST setting we cannot use must not cost the node its drain:
		// auto still has scontrol.
		c.log.WithError(err).Error("slurmrestd settings unusable; using scontrol only")
		c.rest = nil
	}
	return nil
}

func newRESTFromConfig(cfg config.Slurm, opts []Option) (*REST, error) {
	return NewREST(cfg.URL, cfg.User, cfg.TokenFile, cfg.Timeout.Duration, cfg.Retries, opts...)
}

// Calls is the number of Slurm calls made so far: HTTP requests plus
// scontrol runs, across both backends.
func (c *Client) Calls() int { return c.calls.Load() }

// Backend names what served the last operation ("rest v0.0.42",
// "scontrol"), or the configured mode before any operation.
func (c *Client) Backend() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used != "" {
		return c.used
	}
	return c.mode
}

// Ping checks slurmrestd and our credentials where REST is configured.
// An ErrUnauthorized in the chain means the token was refused: HTTP 401 or
// 511, or v0.0.45's ping status. 22.05 (HTTP 500) and 24.11 (HTTP 200,
// controller DOWN) give no sign of a refused token on ping (recorded), so
// there a refused token reads as slurmctld down.
func (c *Client) Ping(ctx context.Context) error {
	if c.rest == nil {
		return nil
	}
	return c.rest.Ping(ctx)
}

// Node reads one node.
func (c *Client) Node(ctx context.Context, name string) (Node, error) {
	if err := ValidateName(name); err != nil {
		return Node{}, err
	}
	var n Node
	err := c.with(ctx, "read node "+name, func(ctl Controller) error {
		var err error
		n, err = ctl.Node(ctx, name)
		return err
	})
	return n, err
}

// Nodes lists every node, with the same backend choice and fallback as
// Node.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	var ns []Node
	err := c.with(ctx, "list nodes", func(ctl Controller) error {
		var err error
		ns, err = ctl.Nodes(ctx)
		return err
	})
	return ns, err
}

// Drain sets DRAIN with a non-empty reason.
func (c *Client) Drain(ctx context.Context, name, reason string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := checkReason(reason); err != nil {
		return err
	}
	return c.with(ctx, "drain "+name, func(ctl Controller) error {
		return ctl.Drain(ctx, name, reason)
	})
}

// Resume clears DRAIN.
func (c *Client) Resume(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	return c.with(ctx, "resume "+name, func(ctl Controller) error {
		return ctl.Resume(ctx, name)
	})
}

// Tune changes the node's weight and features, with the same backend
// choice and fallback as Drain.
func (c *Client) Tune(ctx context.Context, name string, s Settings) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := CheckSettings(s); err != nil {
		return err
	}
	return c.with(ctx, "tune "+name, func(ctl Controller) error {
		t, ok := ctl.(Tuner)
		if !ok {
			return fmt.Errorf("%s cannot change node settings", ctl.Backend())
		}
		return t.Tune(ctx, name, s)
	})
}
