package healthcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A drain made while the state directory goes bad (full, read-only: here
// replaced by a file once the drain is sent) stands, and the log says
// that the state was lost, not that the policy could not act. Found by
// test/e2e/faults.sh (case 3) on a full and a read-only state tmpfs.
func TestDrainStandsWhenStateCannotBeSaved(t *testing.T) {
	b := newBed(t, "", `"nvidia"`)
	stateDir := filepath.Join(b.dir, "state")
	breaker := filepath.Join(b.dir, "scontrol-breaks-state")
	must(t, os.WriteFile(breaker, []byte(fmt.Sprintf(`#!/bin/sh
%q "$@"; rc=$?
case "$*" in *State=DRAIN*) rm -rf %q && : >%q ;; esac
exit $rc
`, filepath.Join(b.dir, "scontrol"), stateDir, stateDir)), 0o755))
	cfg, err := os.ReadFile(b.cfg)
	must(t, err)
	must(t, os.WriteFile(b.cfg, []byte(strings.Replace(string(cfg),
		fmt.Sprintf("scontrol = %q", filepath.Join(b.dir, "scontrol")), fmt.Sprintf("scontrol = %q", breaker), 1)), 0o644))

	code, out, stderr := b.run(t)
	reason := "gpuhc: host.modules: nvidia: not loaded"
	if code != ExitFail || !strings.Contains(out, "policy: drained: "+reason) {
		t.Fatalf("exit %d, want 1 and the drain\n%s%s", code, out, stderr)
	}
	if node, _ := os.ReadFile(b.state); strings.TrimSpace(string(node)) != "IDLE+DRAIN" {
		t.Errorf("node %q, want drained", node)
	}
	if strings.Contains(stderr, "policy could not act") {
		t.Errorf("a drain that was made is logged as not made:\n%s", stderr)
	}
	if !strings.Contains(stderr, `msg="policy acted, but its state could not be saved; the next run starts from the state saved before"`) ||
		!strings.Contains(stderr, `error="policy state not saved: `) {
		t.Errorf("lost state not logged:\n%s", stderr)
	}

	// The directory back, empty: the next failing run adopts the drain
	// on the node, with no second drain call.
	must(t, os.Remove(stateDir))
	before := len(b.callLog(t))
	if code, out, _ = b.run(t); code != ExitFail || !strings.Contains(out, "policy: already-drained: "+reason) {
		t.Fatalf("next run: exit %d\n%s", code, out)
	}
	for _, c := range b.callLog(t)[before:] {
		if strings.Contains(c, "State=DRAIN") {
			t.Errorf("drained again: %q", c)
		}
	}
}

// An unreadable policy record (a directory in its place) does not stop
// the drain and is not overwritten; the log says the state was lost.
func TestDrainStandsWhenStateIsUnreadable(t *testing.T) {
	b := newBed(t, "", `"nvidia"`)
	must(t, os.MkdirAll(filepath.Join(b.dir, "state", "policy.gpu007.json", "x"), 0o755))
	code, out, stderr := b.run(t)
	if code != ExitFail || !strings.Contains(out, "policy: drained: ") {
		t.Fatalf("exit %d, want 1 and the drain\n%s%s", code, out, stderr)
	}
	if strings.Contains(stderr, "policy could not act") || !strings.Contains(stderr, "unreadable, not overwritten") ||
		!strings.Contains(stderr, "policy acted, but its state could not be saved") {
		t.Errorf("log:\n%s", stderr)
	}
	if fi, err := os.Stat(filepath.Join(b.dir, "state", "policy.gpu007.json")); err != nil || !fi.IsDir() {
		t.Errorf("unreadable record overwritten: %v", err)
	}
}
