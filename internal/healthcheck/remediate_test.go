package healthcheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// remediationBed is bed with [remediate] on and a stand-in nvidia-smi
// that logs its argv.
func remediationBed(t *testing.T) (bed, string) {
	t.Helper()
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	smiLog := filepath.Join(b.dir, "nvidia-smi.log")
	smi := filepath.Join(b.dir, "nvidia-smi")
	must(t, os.WriteFile(smi, []byte(fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %q\necho reset done\n", smiLog)), 0o755))
	f, err := os.OpenFile(b.cfg, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = fmt.Fprintf(f, "[remediate]\nenabled = true\nnvidia_smi = %q\nreset_timeout = \"5s\"\n", smi)
	must(t, err)
	must(t, f.Close())
	return b, smiLog
}

func eventKinds(t *testing.T, b bed) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.dir, "events.jsonl"))
	must(t, err)
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev struct{ Kind, Action string }
		must(t, json.Unmarshal([]byte(line), &ev))
		if ev.Kind != "transition" && ev.Kind != "heartbeat" {
			kinds = append(kinds, ev.Kind+"/"+ev.Action)
		}
	}
	return kinds
}

// A GPU that asks for a reset is drained, reset before the next run's
// checks, judged healthy by them, and resumed by the normal path.
func TestResetGPURemediation(t *testing.T) {
	b, smiLog := remediationBed(t)
	code, out, _ := b.run(t, "--simulate", "dgxh100", "--inject", "gpu3:recovery=reset")
	reason := "gpuhc: gpu.recovery: gpu3 (SN 1654922000003, 0000:5d:00.0): GPU recovery action: GPU Reset Required [simulated]"
	if code != ExitFail || !strings.Contains(out, "policy: drained: "+reason) {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if _, err := os.Stat(smiLog); err == nil {
		t.Fatal("reset before the drain was even made")
	}
	// The reset cleared the fault: the simulation runs without it.
	code, out, _ = b.run(t, "--simulate", "dgxh100")
	if code != ExitHealthy || !strings.Contains(out, "remediate: finished: GPU reset") || !strings.Contains(out, "healthy run 1 of 2") {
		t.Fatalf("remediation run: exit %d\n%s", code, out)
	}
	if got, _ := os.ReadFile(smiLog); string(got) != "--gpu-reset -i 0000:5d:00.0\n" {
		t.Errorf("nvidia-smi argv %q", got)
	}
	if r, _ := os.ReadFile(b.state + ".reason"); !strings.HasPrefix(string(r), "gpuhc: reset-gpu: gpu3 (SN 1654922000003, 0000:5d:00.0): gpu.recovery: GPU recovery action") {
		t.Errorf("reason during the remediation %q", r)
	}
	if code, out, _ = b.run(t, "--simulate", "dgxh100"); code != ExitHealthy || !strings.Contains(out, "policy: resumed") {
		t.Fatalf("resume run: exit %d\n%s", code, out)
	}
	want := []string{"drain/reset-gpu", "remediation-started/reset-gpu", "remediation-finished/reset-gpu", "resume/"}
	if got := eventKinds(t, b); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if got, _ := os.ReadFile(smiLog); strings.Count(string(got), "\n") != 1 {
		t.Errorf("nvidia-smi ran more than once: %q", got)
	}
}

// Remediation on changes nothing for a healthy node: no Slurm call, no
// remediation record.
func TestRemediationLeavesHealthyNodesAlone(t *testing.T) {
	b, _ := remediationBed(t)
	code, out, _ := b.run(t, "--simulate", "dgxh100")
	if code != ExitHealthy || !strings.Contains(out, "[0 Slurm calls]") || b.callLog(t) != nil || strings.Contains(out, "remediate:") {
		t.Fatalf("exit %d, calls %q\n%s", code, b.callLog(t), out)
	}
	if m, _ := filepath.Glob(filepath.Join(b.dir, "state", "remediate.*")); len(m) != 0 {
		t.Errorf("healthy run wrote %v", m)
	}
}
