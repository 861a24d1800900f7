package events

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuhc/gpuhc/internal/check"
)

func TestAppendConcurrentWritersKeepWholeLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log", "events.jsonl")
	l := Log{Path: path}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				ev := Event{Time: time.Unix(int64(i), 0).UTC(), Kind: KindTransition, Node: "gpu001", Message: string(rune('a' + w))}
				if err := l.Append(context.Background(), ev, ev); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %d torn: %q", n+1, sc.Text())
		}
		if ev.Node != "gpu001" || ev.Kind != KindTransition {
			t.Fatalf("line %d wrong: %+v", n+1, ev)
		}
		n++
	}
	if n != 8*50*2 {
		t.Errorf("got %d lines, want %d", n, 800)
	}
}

func TestAppendFieldNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	ev := Event{Time: time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC), Kind: KindDrain, Node: "gpu001",
		Check: "host.mounts", Component: "/scratch", Status: "FAIL", Message: "not mounted", Action: "drain", BootID: "b"}
	if err := (Log{Path: path}).Append(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"time", "node", "check", "component", "status", "message", "action", "boot_id", "job_id"} {
		if _, ok := m[k]; !ok {
			t.Errorf("field %q missing from %s", k, b)
		}
	}
	if m["time"] != "2026-11-30T06:00:00Z" {
		t.Errorf("time not RFC 3339: %v", m["time"])
	}
}

func TestAppendGivesUpOnHeldLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := (Log{Path: path}).Append(ctx, Event{Kind: KindDrain}); err == nil {
		t.Error("append succeeded while another writer held the lock")
	}
}

func TestBootID(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "proc/sys/kernel/random")
	os.MkdirAll(p, 0o755)
	os.WriteFile(filepath.Join(p, "boot_id"), []byte("3f1c7e0a-8d2b-4a51-9a0e-1b2c3d4e5f60\n"), 0o644)
	if got := BootID(root); got != "3f1c7e0a-8d2b-4a51-9a0e-1b2c3d4e5f60" {
		t.Errorf("got %q", got)
	}
	os.WriteFile(filepath.Join(p, "boot_id"), []byte("not a boot id\x00"), 0o644)
	if got := BootID(root); got != "" {
		t.Errorf("garbage accepted: %q", got)
	}
	if got := BootID(t.TempDir()); got != "" {
		t.Errorf("missing file: %q", got)
	}
}

func TestAppendAfterTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, []byte(`{"kind":"drain","node":"gpu0`), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := (Log{Path: path}).Append(context.Background(), Event{Kind: KindResume, Node: "gpu001"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var ev Event
	if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &ev) != nil || ev.Kind != KindResume {
		t.Errorf("event glued to the torn line: %q", b)
	}
}

// One measurement event per figure, stamped with the base event; results
// without figures, and figures JSON cannot hold, give none.
func TestMeasurements(t *testing.T) {
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	base := Event{Time: at, Node: "gpu001", By: "prolog", JobID: "4242", BootID: "b"}
	results := []check.Result{
		{Check: "host.cpu", Component: "host", Status: check.OK, Message: "ok"},
		{Check: "bandwidth", Component: "gpu0/h2d", Status: check.Fail, Message: "H2D 31.0 GB/s < floor 48",
			IDs: check.IDs{Serial: "SN0"}, Figures: []check.Figure{{Name: "h2d", Value: 31, Unit: "GB/s", Floor: 48}}},
		{Check: "bandwidth", Component: "gpu0/d2h", Status: check.OK, Message: "D2H 0.0 GB/s (no floor)",
			Figures: []check.Figure{{Name: "d2h", Value: 0, Unit: "GB/s"}, {Name: "bad", Value: math.NaN(), Unit: "GB/s"},
				{Name: "bad", Value: 1, Unit: "GB/s", Floor: math.Inf(1)}}},
	}
	evs := Measurements(base, results)
	if len(evs) != 2 {
		t.Fatalf("%d events: %+v", len(evs), evs)
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := (Log{Path: path}).Append(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2026-11-30T06:00:00Z","kind":"measurement","node":"gpu001","check":"bandwidth","component":"gpu0/h2d","serial":"SN0","status":"FAIL","message":"H2D 31.0 GB/s \u003c floor 48","by":"prolog","name":"h2d","value":31,"unit":"GB/s","floor":48,"job_id":"4242","boot_id":"b"}
{"time":"2026-11-30T06:00:00Z","kind":"measurement","node":"gpu001","check":"bandwidth","component":"gpu0/d2h","status":"OK","message":"D2H 0.0 GB/s (no floor)","by":"prolog","name":"d2h","value":0,"unit":"GB/s","job_id":"4242","boot_id":"b"}
`
	if string(b) != want {
		t.Errorf("log:\n%s\nwant:\n%s", b, want)
	}
	if base.Kind != "" || base.Value != nil {
		t.Errorf("base changed: %+v", base)
	}
}
