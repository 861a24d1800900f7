package catalog

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

func TestTasks(t *testing.T) {
	cfg := config.Default()
	cfg.Deadline.Duration = 20 * time.Second
	cfg.CheckTimeout.Duration = 10 * time.Second
	cfg.Checks.Thermal.Enabled = false
	cfg.Checks.Mounts.Timeout.Duration = 3 * time.Second
	cfg.Checks.CPU.Timeout.Duration = time.Minute // capped by the deadline
	cfg.Checks.IB.Port.Timeout.Duration = 2 * time.Second
	cfg.Checks.Fabric.Manager.Enabled = false

	got := map[string]time.Duration{}
	for _, task := range Tasks(cfg, Env{}) {
		got[task.Check.Name()] = task.Timeout
	}
	want := map[string]time.Duration{
		"host.cpu": 20 * time.Second, "host.memory": 10 * time.Second, "host.modules": 10 * time.Second,
		"host.mounts": 3 * time.Second, "host.processes": 10 * time.Second,
		"ib.port": 2 * time.Second, "ib.counters": 10 * time.Second, "ib.gdr": 10 * time.Second,
		"topology": 10 * time.Second, "host.kernel": 10 * time.Second, "fabric.sxid": 10 * time.Second,
	}
	if len(got) != len(want) {
		t.Fatalf("tasks %v, want %v", got, want)
	}
	for name, d := range want {
		if got[name] != d {
			t.Errorf("%s: timeout %v, want %v", name, got[name], d)
		}
	}
}

func TestTasksWithGPU(t *testing.T) {
	cfg := config.Default()
	cfg.Checks.GPU.Power.Enabled = false
	cfg.Checks.IB.GDR.Enabled = false
	env := Env{GPU: gpu.NewNode(nil, "/", -1, "")}
	var names []string
	for _, task := range Tasks(cfg, env) {
		names = append(names, task.Check.Name())
	}
	want := "host.cpu host.memory host.modules host.mounts host.processes host.thermal " +
		"gpu.count gpu.driver gpu.lost gpu.xid gpu.recovery gpu.memory gpu.pcie gpu.nvlink gpu.fabric gpu.thermal gpu.config " +
		"host.kernel fabric.sxid ib.port ib.counters fabric.manager topology"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("checks\n got %s\nwant %s", got, want)
	}
}

// The rules over the kernel-log pass register with it as they are built,
// so that its cursor waits for every one of them; KernelRules finds them.
func TestKernelRules(t *testing.T) {
	cfg := config.Default()
	log := kmsg.NewLog(nil, statefile.Dir{Path: t.TempDir(), ReadOnly: true})
	env := Env{GPU: gpu.NewNode(nil, "/", -1, ""), Kernel: log}
	var names []string
	for _, task := range KernelRules(cfg, env) {
		names = append(names, task.Check.Name())
	}
	const all = "gpu.xid host.kernel fabric.sxid"
	if got := strings.Join(names, " "); got != all || strings.Join(log.Rules(), " ") != all {
		t.Errorf("kernel rules %q, registered %q", got, log.Rules())
	}
	cfg.Checks.GPU.XID.Enabled, cfg.Checks.Kernel.Enabled, cfg.Checks.Fabric.SXid.Enabled = false, false, false
	log = kmsg.NewLog(nil, statefile.Dir{Path: t.TempDir(), ReadOnly: true})
	if rules := KernelRules(cfg, Env{GPU: gpu.NewNode(nil, "/", -1, ""), Kernel: log}); len(rules) != 0 || len(log.Rules()) != 0 {
		t.Errorf("a disabled rule was registered: %v", log.Rules())
	}
}

// Deep checks run only when asked for, never in a plain health-check run.
func TestDeep(t *testing.T) {
	cfg := config.Default()
	for _, task := range Tasks(cfg, Env{}) {
		if task.Check.Name() == "bandwidth" {
			t.Errorf("Tasks includes the bandwidth check")
		}
	}
	deep := Deep(cfg, Env{})
	if len(deep) != 1 || deep[0].Check.Name() != "bandwidth" {
		t.Fatalf("Deep: %d tasks, want the bandwidth check", len(deep))
	}
	cfg.Checks.Bandwidth.Enabled = false
	if n := len(Deep(cfg, Env{})); n != 0 {
		t.Errorf("Deep with bandwidth disabled: %d tasks", n)
	}
}
