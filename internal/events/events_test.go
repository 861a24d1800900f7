package events

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
