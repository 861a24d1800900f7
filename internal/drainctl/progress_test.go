package drainctl

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
)

// runProgress runs stats over a log of 3 x progressEvery heartbeats with
// a clock that moves a second per look, stderr a terminal or not.
func runProgress(t *testing.T, tty bool) (stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range 3 * progressEvery {
		if err := enc.Encode(events.Event{Time: t0.Add(time.Duration(i) * time.Minute), Kind: "heartbeat", Node: "gpu001", Hours: 1.0 / 60}); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(dir, "gpu001.jsonl")
	if err := os.WriteFile(log, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	clock := t0
	var out, errb bytes.Buffer
	p := Program{
		Args:             []string{"stats", "--config", filepath.Join(dir, "none.toml"), "--events", log, "--json"},
		Stdout:           &out,
		Stderr:           &errb,
		Now:              func() time.Time { clock = clock.Add(time.Second); return clock },
		StderrIsTerminal: func() bool { return tty },
	}
	if code := p.Main(); code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	return out.String(), errb.String()
}

func TestProgressOnTerminal(t *testing.T) {
	out, errs := runProgress(t, true)
	if !strings.Contains(errs, "reading event logs: 4096 events") || !strings.Contains(errs, "12288 events") {
		t.Errorf("stderr on a terminal = %q, want progress lines", errs)
	}
	if !strings.HasSuffix(errs, "\r\x1b[K") {
		t.Errorf("progress line not cleared at the end: %q", errs)
	}
	if strings.Contains(out, "reading event logs") {
		t.Errorf("progress on stdout: %q", out)
	}
}

func TestProgressSilentOffTerminal(t *testing.T) {
	out, errs := runProgress(t, false)
	if errs != "" {
		t.Errorf("stderr off a terminal = %q, want nothing", errs)
	}
	if !strings.Contains(out, `"events": 12288`) {
		t.Errorf("stats --json = %.200q, want 12288 events", out)
	}
}
