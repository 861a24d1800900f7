package jobrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/runenv"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

type named string

func (n named) Name() string                       { return string(n) }
func (n named) Run(context.Context) []check.Result { return nil }

func TestSelect(t *testing.T) {
	all := []check.Task{{Check: named("gpu.count"), Timeout: 10 * time.Second}, {Check: named("gpu.xid"), Timeout: 2 * time.Second},
		{Check: named("host.mounts"), Timeout: 10 * time.Second}}
	tests := []struct {
		name      string
		names     []string
		wantTasks string
		wantSkips string
	}{
		{"in the order named, others left out", []string{"gpu.xid", "gpu.count"}, "gpu.xid:2s gpu.count:5s", ""},
		{"a check this build lacks (or disabled) is a SKIP, not a crash", []string{"gpu.count", "ib.port", "bandwidth"}, "gpu.count:5s", "ib.port bandwidth"},
		{"nothing named", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tasks, missing := Select(all, tt.names, 5*time.Second)
			var got, skips []string
			for _, task := range tasks {
				got = append(got, task.Check.Name()+":"+task.Timeout.String())
			}
			for _, m := range missing {
				r := m.Results[0]
				if r.Status != check.Skip || r.Check != m.Name || !strings.Contains(r.Message, "not run") {
					t.Errorf("missing %s: %+v", m.Name, r)
				}
				skips = append(skips, m.Name)
			}
			if strings.Join(got, " ") != tt.wantTasks || strings.Join(skips, " ") != tt.wantSkips {
				t.Errorf("tasks %q skips %q, want %q and %q", got, skips, tt.wantTasks, tt.wantSkips)
			}
		})
	}
}

func TestSoften(t *testing.T) {
	timed := []check.Timed{{Name: "gpu.memory", Results: []check.Result{
		{Check: "gpu.memory", Component: "gpu3", Status: check.Fail, Action: check.ActionReboot, Message: "NVML did not answer in 4.2s"},
		{Check: "gpu.memory", Component: "gpu4", Status: check.Fail, Action: check.ActionDrain, Message: "volatile DBE 2 > 0"},
	}}}
	Soften(timed, "prolog")
	hung, dbe := timed[0].Results[0], timed[0].Results[1]
	if hung.Status != check.Error || hung.Action != check.ActionNone || !strings.Contains(hung.Message, "within the prolog's budget") {
		t.Errorf("hang: %+v", hung)
	}
	if dbe.Status != check.Fail || dbe.Action != check.ActionDrain {
		t.Errorf("a real FAIL was softened: %+v", dbe)
	}
}

func TestFailExit(t *testing.T) {
	worthy := []check.Result{{Status: check.Fail}}
	tests := []struct {
		name string
		o    Outcome
		dry  bool
		want bool
	}{
		{"healthy", Outcome{Run: policy.Run{Outcome: policy.Outcome{Kind: policy.Nothing}}}, false, false},
		{"drained", Outcome{Worthy: worthy, Run: policy.Run{Outcome: policy.Outcome{Kind: policy.Drained}}}, false, true},
		{"drain failed: still non-zero", Outcome{Worthy: worthy, Run: policy.Run{Outcome: policy.Outcome{Kind: policy.Failed}}}, false, true},
		{"already drained by an admin", Outcome{Worthy: worthy, Run: policy.Run{Outcome: policy.Outcome{Kind: policy.ForeignDrain}}}, false, true},
		{"storm guard refused", Outcome{Worthy: worthy, Run: policy.Run{Outcome: policy.Outcome{Kind: policy.DrainSuppressed}}}, false, false},
		{"dry run", Outcome{Worthy: worthy, Run: policy.Run{Outcome: policy.Outcome{Kind: policy.WouldDrain}}}, true, false},
		{"drain failed, spared (setup fault, or the storm guard's cached count)",
			Outcome{Worthy: worthy, Run: policy.Run{Outcome: policy.Outcome{Kind: policy.Failed}}, Spared: "drain suppressed (storm guard, cached count): ..."}, false, false},
	}
	for _, tt := range tests {
		if got := tt.o.FailExit(tt.dry); got != tt.want {
			t.Errorf("%s: FailExit %v, want %v", tt.name, got, tt.want)
		}
		if note := tt.o.ExitNote(tt.dry); (note == "") != (tt.want || len(tt.o.Worthy) == 0 || tt.dry) {
			t.Errorf("%s: ExitNote %q", tt.name, note)
		}
	}
}

// ctl is node control whose calls fail as told.
type ctl struct {
	getErr, drainErr error
}

func (c *ctl) Backend() string { return "test" }
func (c *ctl) Node(context.Context, string) (slurm.Node, error) {
	return slurm.Node{Name: "gpu001", State: []string{"IDLE"}}, c.getErr
}
func (c *ctl) Nodes(context.Context) ([]slurm.Node, error) {
	return []slurm.Node{{Name: "gpu001", State: []string{"IDLE"}}}, nil
}
func (c *ctl) Drain(context.Context, string, string) error { return c.drainErr }
func (c *ctl) Resume(context.Context, string) error        { return nil }

// When the drain cannot be made, the exit status follows FailExit's rule:
// a fault of gpuhc's setup, or a fresh cached storm count at the limit,
// exits 0; Slurm merely failing exits non-zero.
func TestApplyWhenTheDrainCannotBeMade(t *testing.T) {
	fail := []check.Result{{Check: "gpu.xid", Component: "gpu3", Status: check.Fail, Message: "XID 79"}}
	tokenErr := &fs.PathError{Op: "open", Path: "/etc/gpuhc/slurm.token", Err: fs.ErrNotExist}
	tests := []struct {
		name string
		// build fails node control's construction; else c is used.
		build error
		c     ctl
		// cache is the storm guard's count: "" none, "fresh" or "stale",
		// at the limit (10 of 10 nodes drained, limit 1).
		cache    string
		wantExit bool
		wantOut  string
	}{
		{name: "node control cannot be built (config): exit 0", build: errors.New(`slurm backend "rset"`),
			wantOut: "fault of gpuhc's setup"},
		{name: "credentials refused: exit 0", c: ctl{drainErr: fmt.Errorf("drain: %w", slurm.ErrUnauthorized)},
			wantOut: "fault of gpuhc's setup"},
		{name: "token file missing: exit 0", c: ctl{getErr: fmt.Errorf("token file: %w", tokenErr)},
			wantOut: "fault of gpuhc's setup"},
		{name: "token file group-readable: exit 0", c: ctl{getErr: fmt.Errorf("node gpu001: %w",
			&slurm.ConfigError{Err: errors.New("token file /etc/gpuhc/slurm.token: mode 0640 is group- or world-accessible")})},
			wantOut: "fault of gpuhc's setup"},
		{name: "Slurm unreachable, no cached count: non-zero, slurmd drains", c: ctl{getErr: errors.New("connection refused")},
			wantExit: true, wantOut: "policy: error"},
		{name: "Slurm unreachable, a stale cached count: non-zero", c: ctl{getErr: errors.New("connection refused")}, cache: "stale",
			wantExit: true, wantOut: "policy: error"},
		{name: "Slurm unreachable, a fresh cached count at the limit: exit 0", c: ctl{getErr: errors.New("connection refused")}, cache: "fresh",
			wantOut: "drain suppressed (storm guard, cached count): 10 of 11 nodes already drained by gpuhc"},
		{name: "drain refused by slurmctld after a fresh count below the limit: non-zero", c: ctl{drainErr: errors.New("slurmctld: busy")},
			wantExit: true, wantOut: "policy: error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.StateDir, cfg.Root = t.TempDir(), t.TempDir()
			cfg.Policy.StormJitter.Duration = 0
			cfg.Policy.MaxDrainedNodes, cfg.Policy.MaxDrainedFraction = 1, 0
			now := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
			if tt.cache != "" {
				at := now.Add(-10 * time.Second)
				if tt.cache == "stale" {
					at = now.Add(-time.Hour)
				}
				b := fmt.Sprintf(`{"node":"gpu001","drained":10,"total":11,"time":%q}`, at.Format(time.RFC3339))
				if err := os.WriteFile(policy.StormFile(cfg.StateDir), []byte(b), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			log := logrus.New()
			log.SetOutput(io.Discard)
			c := tt.c
			r := &Run{Node: "gpu001", Cfg: cfg, Log: logrus.NewEntry(log), Start: time.Now(), ReadOnly: true,
				P: Program{By: "prolog", Process: runenv.Process{Stdout: &out, Now: func() time.Time { return now }},
					Controller: func(config.Slurm, logrus.FieldLogger) (slurm.Controller, error) {
						if tt.build != nil {
							return nil, tt.build
						}
						return &c, nil
					}}}
			o := r.Apply(fail, false, 5*time.Second)
			if o.Run.Outcome.Kind != policy.Failed || o.FailExit(false) != tt.wantExit || !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("outcome %s, FailExit %v (want %v), spared %q; output wants %q:\n%s", o.Run.Outcome.Kind, o.FailExit(false), tt.wantExit, o.Spared, tt.wantOut, out.String())
			}
			if r.failing.Load() != tt.wantExit {
				t.Errorf("the watchdog would exit non-zero: %v", r.failing.Load())
			}
		})
	}
}
