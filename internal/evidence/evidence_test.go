package evidence

import (
	"regexp"
	"strings"
	"testing"
)

// TestKernelCorpusValid fails CI on a bad row: Kernel validates every
// item (known check, status and action, source unless synthetic, basis,
// unique id, text inside raw).
func TestKernelCorpusValid(t *testing.T) {
	items, err := Kernel()
	if err != nil {
		t.Fatal(err)
	}
	real, synthetic := 0, 0
	for _, it := range items {
		if it.Synthetic {
			synthetic++
		} else {
			real++
		}
	}
	if real < 60 {
		t.Errorf("%d real (non-synthetic) lines, want at least 60", real)
	}
	if total := real + synthetic; synthetic*10 > total {
		t.Errorf("%d of %d lines are synthetic, want at most 10%%", synthetic, total)
	}
}

var xidLine = regexp.MustCompile(`NVRM: Xid \(PCI:[0-9a-fA-F]{4,5}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?\): (\d+),`)

func xid(it KernelItem) string {
	if m := xidLine.FindStringSubmatch(it.Text); m != nil {
		return m[1]
	}
	return ""
}

func has(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// coverage is every class of evidence the corpus must hold at least one
// real line of (issue 11's list). A class is recognised from the line
// itself and from the expected verdict, so a mislabelled row does not
// count.
var coverage = []struct {
	class string
	is    func(KernelItem) bool
}{
	{"xid RESTART_BM", func(it KernelItem) bool {
		return it.Check == "gpu.xid" && has(it.Basis, "immediate action RESTART_BM") && it.Action == "reboot"
	}},
	{"xid RESET_GPU", func(it KernelItem) bool {
		return it.Check == "gpu.xid" && has(it.Basis, "immediate action RESET_GPU") && it.Action == "reset-gpu"
	}},
	{"xid RESTART_APP", func(it KernelItem) bool {
		return it.Check == "gpu.xid" && has(it.Basis, "immediate action RESTART_APP") && it.Status == "WARN"
	}},
	{"xid IGNORE", func(it KernelItem) bool {
		return it.Check == "gpu.xid" && has(it.Basis, "immediate action IGNORE") && it.Status == "OK"
	}},
	{"xid 144-150 Fatal", func(it KernelItem) bool {
		return isNVLink5(it) && has(it.Text, " Fatal ") && it.Status == "FAIL"
	}},
	{"xid 144-150 Nonfatal", func(it KernelItem) bool {
		return isNVLink5(it) && has(it.Text, " Nonfatal ") && it.Status == "OK"
	}},
	{"xid 145 RLW_RXPIPE Nonfatal (B200)", func(it KernelItem) bool {
		return xid(it) == "145" && has(it.Text, "RLW_RXPIPE Nonfatal") && it.Status == "OK"
	}},
	{"xid 154 GPU Reset", func(it KernelItem) bool { return is154(it, "(GPU Reset Required)", "reset-gpu") }},
	{"xid 154 Node Reboot", func(it KernelItem) bool { return is154(it, "(Node Reboot Required)", "reboot") }},
	{"xid 154 back to None", func(it KernelItem) bool { return is154(it, "to 0x0 (None)", "none") }},
	{"xid 154 Drain and Reset", func(it KernelItem) bool { return is154(it, "to 0x4 (Drain and Reset)", "reset-gpu") }},
	{"xid 48", func(it KernelItem) bool { return xid(it) == "48" && it.Status == "FAIL" }},
	{"xid 74", func(it KernelItem) bool { return xid(it) == "74" }},
	{"xid 45", func(it KernelItem) bool { return xid(it) == "45" }},
	{"xid 5-digit VMD domain", func(it KernelItem) bool {
		return has(it.Text, "Xid (PCI:1") && len(it.Component) == len("10000:01:00.0")
	}},
	{"sxid fatal", func(it KernelItem) bool {
		return it.Check == "fabric.sxid" && it.Status == "FAIL" && it.Action == "reset-gpu"
	}},
	{"sxid non-fatal", func(it KernelItem) bool {
		return it.Check == "fabric.sxid" && it.Status == "WARN" && has(it.Text, "Non-fatal")
	}},
	{"aer fatal", func(it KernelItem) bool {
		return kernel(it) && has(it.Text, "AER: ") && has(it.Text, "Fatal)") && !has(it.Text, "Non-Fatal") && it.Status == "FAIL"
	}},
	{"aer non-fatal", func(it KernelItem) bool {
		return kernel(it) && has(it.Text, "AER: ", "Non-Fatal") && it.Status != "OK"
	}},
	{"aer corrected", func(it KernelItem) bool {
		return kernel(it) && (has(it.Text, "AER: Corrected") || has(it.Text, "AER: Correctable") || has(it.Text, "AER: Multiple Corrected")) && it.Status == "OK"
	}},
	{"edac/mce uncorrected", func(it KernelItem) bool {
		return kernel(it) && (has(it.Text, "EDAC") || has(it.Text, "mce")) && has(strings.ToLower(it.Text), "ue ", "error") && it.Status == "FAIL"
	}},
	{"edac/mce corrected", func(it KernelItem) bool {
		return kernel(it) && (has(it.Text, "EDAC") || has(it.Text, "mce")) && has(it.Text, "CE ") && it.Status == "OK"
	}},
	{"soft lockup", func(it KernelItem) bool { return kernel(it) && has(it.Text, "soft lockup") && it.Action == "reboot" }},
	{"hung task", func(it KernelItem) bool {
		return kernel(it) && has(it.Text, "blocked for more than") && it.Status == "WARN"
	}},
	{"rcu stall", func(it KernelItem) bool {
		return kernel(it) && has(it.Text, "rcu") && has(it.Text, "stall") && it.Action == "reboot"
	}},
	{"block I/O error", func(it KernelItem) bool { return kernel(it) && has(it.Text, "error, dev ") && it.Action == "drain" }},
	{"nvme", func(it KernelItem) bool { return kernel(it) && has(it.Text, "nvme nvme") && it.Status != "OK" }},
	{"read-only remount", func(it KernelItem) bool {
		return kernel(it) && has(strings.ToLower(it.Text), "read-only") && it.Action == "drain"
	}},
	{"mlx5 health / fw fatal", func(it KernelItem) bool {
		return kernel(it) && has(it.Text, "mlx5_core") && it.Action == "reboot" && pciAddr.MatchString(it.Component)
	}},
	{"oom kills slurmd or munged", func(it KernelItem) bool {
		return kernel(it) && (has(it.Text, "(slurmd)") || has(it.Text, "(munged)")) && it.Action == "drain"
	}},
	{"oom kills a user process", func(it KernelItem) bool {
		return kernel(it) && has(it.Text, "Killed process") && it.Status == "OK"
	}},
	{"healthy NVRM load", func(it KernelItem) bool { return has(it.Text, "NVRM: loading") && it.Status == "OK" }},
	{"healthy mlx5 firmware version", func(it KernelItem) bool {
		return has(it.Text, "mlx5_core", "firmware version") && it.Status == "OK"
	}},
}

// syntheticOK are the classes no public sample was found for (see the
// README): a synthetic line counts for them.
var syntheticOK = map[string]bool{
	"xid 154 Node Reboot":        true,
	"xid 154 back to None":       true,
	"xid 5-digit VMD domain":     true,
	"oom kills slurmd or munged": true,
}

func isNVLink5(it KernelItem) bool {
	switch xid(it) {
	case "144", "145", "146", "147", "148", "149", "150":
		return true
	}
	return false
}

func is154(it KernelItem, action, want string) bool {
	return xid(it) == "154" && has(it.Text, "to 0x", action) && it.Action == want
}

func kernel(it KernelItem) bool { return it.Check == "host.kernel" }

func TestKernelCorpusCoverage(t *testing.T) {
	items, err := Kernel()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range coverage {
		n := 0
		for _, it := range items {
			if (syntheticOK[c.class] || !it.Synthetic) && c.is(it) {
				n++
			}
		}
		if n == 0 {
			t.Errorf("no line of class %q", c.class)
		}
	}
}

// TestParseKernelRejects guards the validation itself: each bad row
// must be refused, or a broken corpus would pass.
func TestParseKernelRejects(t *testing.T) {
	good := `{"id":"a","text":"NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.","source":"https://example.org/1","synthetic":false,"check":"gpu.xid","status":"FAIL","action":"reboot","component":"0000:3b:00.0","basis":"catalog 79 RESTART_BM"}`
	if _, err := parseKernel([]byte(good)); err != nil {
		t.Fatalf("good row refused: %v", err)
	}
	bad := map[string]string{
		"duplicate id":      good + "\n" + good,
		"unknown check":     strings.Replace(good, `"gpu.xid"`, `"gpu.xids"`, 1),
		"unknown status":    strings.Replace(good, `"FAIL"`, `"BAD"`, 1),
		"error status":      strings.Replace(good, `"FAIL"`, `"ERROR"`, 1),
		"unknown action":    strings.Replace(good, `"reboot"`, `"power-cycle"`, 1),
		"fail, no action":   strings.Replace(good, `"reboot"`, `"none"`, 1),
		"ok with action":    strings.Replace(good, `"FAIL"`, `"OK"`, 1),
		"no basis":          strings.Replace(good, `"catalog 79 RESTART_BM"`, `""`, 1),
		"no source":         strings.Replace(good, `"https://example.org/1"`, `""`, 1),
		"synthetic, no why": strings.Replace(strings.Replace(good, `"https://example.org/1"`, `""`, 1), `"synthetic":false`, `"synthetic":true`, 1),
		"bad component":     strings.Replace(good, `"0000:3b:00.0"`, `"3b:00"`, 1),
		"raw lacks text":    strings.Replace(good, `"source"`, `"raw":"[1.0] something else","source"`, 1),
		"unknown field":     strings.Replace(good, `"source"`, `"sauce":"x","source"`, 1),
		"not json":          good[:20],
	}
	for name, data := range bad {
		if _, err := parseKernel([]byte(data)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestLogs(t *testing.T) {
	logs, err := Logs()
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) < 2 {
		t.Fatalf("%d kernel logs, want at least 2", len(logs))
	}
	healthy, failing := 0, 0
	for _, l := range logs {
		lines, err := l.Lines()
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) < 20 || len(lines) > 300 {
			t.Errorf("%s: %d lines, want 20-300", l.Name, len(lines))
		}
		if len(l.Expect.Verdicts) == 0 && l.Expect.HealthyOtherwise {
			healthy++
		}
		for _, v := range l.Expect.Verdicts {
			if v.Status == "FAIL" {
				failing++
				break
			}
		}
	}
	if healthy == 0 || failing == 0 {
		t.Errorf("%d healthy and %d failing logs, want at least one of each", healthy, failing)
	}
}

func TestFabricManagerLogs(t *testing.T) {
	logs, err := FabricManagerLogs()
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) == 0 {
		t.Fatal("no Fabric Manager log")
	}
}
