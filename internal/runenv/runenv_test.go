package runenv

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/policy"
)

func TestMarkSimulated(t *testing.T) {
	timed := []check.Timed{
		{Name: "gpu.xid", Results: []check.Result{{Message: "XID 79"}}},
		{Name: "host.mounts", Results: []check.Result{{Message: "mounted"}}},
	}
	MarkSimulated(timed)
	if timed[0].Results[0].Message != "XID 79 [simulated]" || timed[1].Results[0].Message != "mounted" {
		t.Errorf("%+v", timed)
	}
}

// A replay marks the kernel-log rules' results, except those a fire drill
// already marked.
func TestMarkReplayed(t *testing.T) {
	timed := []check.Timed{
		{Name: "gpu.xid", Results: []check.Result{{Message: "XID 79 [simulated]"}}},
		{Name: "host.kernel", Results: []check.Result{{Message: "soft lockup"}}},
		{Name: "host.mounts", Results: []check.Result{{Message: "mounted"}}},
	}
	MarkReplayed(timed, []string{"gpu.xid", "host.kernel"})
	if timed[0].Results[0].Message != "XID 79 [simulated]" || timed[1].Results[0].Message != "soft lockup [replayed]" || timed[2].Results[0].Message != "mounted" {
		t.Errorf("%+v", timed)
	}
}

func TestPrintOutcome(t *testing.T) {
	tests := []struct {
		out   policy.Outcome
		calls int
		dry   bool
		want  string
	}{
		{policy.Outcome{Kind: policy.Nothing}, 0, false, "policy: none [0 Slurm calls]\n"},
		{policy.Outcome{Kind: policy.Drained, Detail: "gpuhc: x: y: z"}, 3, false, "policy: drained: gpuhc: x: y: z [3 Slurm calls via scontrol]\n"},
		{policy.Outcome{Kind: policy.Failed, Detail: "unreachable"}, 1, false, "policy: error: unreachable [1 Slurm calls]\n"},
		{policy.Outcome{Kind: policy.WouldDrain, Detail: "gpuhc: x: y: z"}, 0, true, "policy (dry run): would-drain: gpuhc: x: y: z [0 Slurm calls]\n"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		PrintOutcome(&b, tt.out, "scontrol", tt.calls, tt.dry)
		if b.String() != tt.want {
			t.Errorf("got %q, want %q", b.String(), tt.want)
		}
	}
}

func TestPrintTable(t *testing.T) {
	var b bytes.Buffer
	PrintTable(&b, "gpu001", []check.Result{{Check: "gpu.xid", Component: "gpu3", Status: check.Fail, Message: "XID 79"},
		{Check: "gpu.count", Component: "host", Status: check.OK, Message: "8 GPUs"}}, 1500*time.Microsecond)
	if !strings.Contains(b.String(), "gpu001: FAIL: 2 results (1 FAIL, 0 ERROR, 0 WARN, 1 OK, 0 SKIP) in 2ms") {
		t.Errorf("%s", b.String())
	}
}

// A simulation keeps its state apart from the real GPUs'.
func TestChecksSimulatedStateDir(t *testing.T) {
	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	env, err := Checks(cfg, "dgxh100", []string{"gpu3:xid=79"}, true)
	if err != nil || env.State.Path != SimulatedStateDir(cfg.StateDir) || !env.State.ReadOnly || env.GPU.Simulated != "dgxh100" {
		t.Errorf("%+v %v", env, err)
	}
	if _, err := Checks(cfg, "dgxh100", []string{"gpu3:nope"}, false); err == nil {
		t.Error("a bad fault was accepted")
	}
	if env.Kernel == nil || env.Kernel.Source() == nil || env.Kernel.Source().BootID() == "" {
		t.Errorf("no kernel-log pass over the simulated log: %+v", env.Kernel)
	}
	// --kernel-log: the file in place of the simulated log, under a boot
	// id of its own; an unreadable file is refused before anything runs.
	if _, err := (World{Simulate: "dgxh100", KernelLog: "/nonexistent/dmesg.txt"}).Env(cfg); err == nil {
		t.Error("a missing --kernel-log file was accepted")
	}
}

// One run, one boot id: the kernel-log cursor and the events (env.Boot)
// read it once between them, so a reboot id that changes mid-run cannot
// split them.
func TestEnvSharesOneBootID(t *testing.T) {
	cfg := config.Default()
	cfg.Root = t.TempDir()
	cfg.StateDir = t.TempDir()
	p := filepath.Join(cfg.Root, "proc/sys/kernel/random/boot_id")
	write := func(id string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(id+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("0c6d2b3e-5c8f-4b1a-9f0e-2d7c4a1b8e93")
	env, err := World{}.Env(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := env.Boot.ID()
	write("11111111-2222-4333-8444-555555555555")
	if got := env.Kernel.Source().BootID(); got != first || first == "" {
		t.Errorf("the kernel log's boot id %q, the run's %q", got, first)
	}
}
