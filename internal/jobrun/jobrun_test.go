package jobrun

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/policy"
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
	}
	for _, tt := range tests {
		if got := tt.o.FailExit(tt.dry); got != tt.want {
			t.Errorf("%s: FailExit %v, want %v", tt.name, got, tt.want)
		}
	}
}
