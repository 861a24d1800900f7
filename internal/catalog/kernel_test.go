package catalog

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

func names(tasks []check.Task) []string {
	var out []string
	for _, t := range tasks {
		out = append(out, t.Check.Name())
	}
	return out
}

// The kernel-log rules run in every run (without a readable log they
// report ERROR), and each can be turned off.
func TestKernelChecks(t *testing.T) {
	cfg := config.Default()
	if got := names(Tasks(cfg, Env{})); !slices.Contains(got, "host.kernel") || !slices.Contains(got, "fabric.sxid") {
		t.Errorf("without a kernel-log pass: %q", got)
	}
	env := Env{Kernel: replayLog(t), State: statefile.Dir{Path: t.TempDir()}}
	if got := names(Tasks(cfg, env)); !slices.Contains(got, "host.kernel") || !slices.Contains(got, "fabric.sxid") {
		t.Errorf("with a kernel-log pass: %q", got)
	}
	cfg.Checks.Kernel.Enabled, cfg.Checks.Fabric.SXid.Enabled = false, false
	if got := names(Tasks(cfg, env)); slices.Contains(got, "host.kernel") || slices.Contains(got, "fabric.sxid") {
		t.Errorf("both disabled: %q", got)
	}
}

// One snapshot, both rules, through the runner and the policy's reason:
// what slurm would be told.
func TestKernelReasons(t *testing.T) {
	cfg := config.Default()
	cfg.Root = t.TempDir() // no PCI bus: a non-fatal AER could not be placed
	cfg.Checks.Kernel.Override = []config.KernelOverride{{Rule: "hung_task", Status: "ok"}}
	r := replayLog(t,
		"INFO: task kworker/2:1:5747 blocked for more than 120 seconds.",
		"nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up",
		"nvidia 0000:1a:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)",
	)
	env := Env{Kernel: r, State: statefile.Dir{Path: t.TempDir()}}
	var tasks []check.Task
	for _, task := range Tasks(cfg, env) {
		if n := task.Check.Name(); n == "host.kernel" || n == "fabric.sxid" {
			tasks = append(tasks, task)
		}
	}
	res := check.Flatten(check.Run(context.Background(), tasks))
	want := map[string]string{
		"fabric.sxid": "gpuhc: fabric.sxid: 0000:c2:00.0: nvswitch0 link 28: SXid 20034 LTSSM Fault Up (fatal): reset every GPU and NVSwitch of the fabric together (1 this boot)",
		"host.kernel": "gpuhc: host.kernel: 0000:1a:00.0: PCIe AER uncorrected fatal error: nvidia 0000:1a:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID) (1 this boot)",
	}
	if len(res) != 2 {
		t.Fatalf("results %+v", res)
	}
	for _, x := range res {
		if got := policy.Reason([]check.Result{x}); got != want[x.Check] {
			t.Errorf("%s:\n got  %s\n want %s", x.Check, got, want[x.Check])
		}
	}
	if rules := r.Rules(); !slices.Equal(slices.Sorted(slices.Values(rules)), []string{"fabric.sxid", "host.kernel"}) {
		t.Errorf("registered %q", rules)
	}
	if p := r.Pending(); len(p) != 0 {
		t.Errorf("not judged: %q", p)
	}
}

// replayLog is a kernel-log pass over texts, as --kernel-log replays
// them (kmsg.Replay of a saved file): every line new, under a boot id of
// the file's own.
//
// The file is the way in because a text line's level is unknown (-1),
// which a /dev/kmsg record string cannot say: written back as one
// ("-1,0,0,-;...") it would not parse and the line would be lost.
func replayLog(t *testing.T, texts ...string) *kmsg.Log {
	t.Helper()
	return kmsg.NewLog(replaySource(t, strings.Join(texts, "\n")), statefile.Dir{Path: t.TempDir()})
}

// replaySource is kmsg.Replay of a file holding log.
func replaySource(t *testing.T, log string) kmsg.Source {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kernel.log")
	if err := os.WriteFile(path, []byte(log+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := kmsg.Replay(path)
	if err != nil {
		t.Fatal(err)
	}
	return src
}
