package escalate

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/statefile"
)

func TestSeenCountsBoots(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	h := New(dir, "h.json")
	for _, tc := range []struct {
		part, problem, boot string
		want                int
	}{
		{"SN1", "xid79", "b1", 1},
		{"SN1", "xid79", "b1", 1}, // the same boot again
		{"SN1", "xid79", "b2", 2},
		{"SN1", "xid48", "b2", 1}, // another problem
		{"SN2", "xid79", "b2", 1}, // another part
		{"SN1", "xid79", "b3", 3},
		{"", "xid79", "b3", 0},  // no serial: not recorded
		{"SN1", "xid79", "", 0}, // no boot id: not recorded
	} {
		got, err := h.Seen(tc.part, tc.problem, tc.boot)
		if err != nil || got != tc.want {
			t.Errorf("Seen(%q, %q, %q) = %d, %v; want %d", tc.part, tc.problem, tc.boot, got, err, tc.want)
		}
	}
	if n, err := h.Boots("SN1", "xid79"); n != 3 || err != nil {
		t.Errorf("Boots = %d, %v", n, err)
	}
}

// The same boot again writes nothing; a read-only dir never writes.
func TestSeenWritesOnlyNews(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	h := New(dir, "h.json")
	if _, err := h.Seen("SN1", "xid79", "b1"); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir.Path, "h.json")
	st, _ := os.Stat(p)
	if err := os.Chmod(dir.Path, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir.Path, 0o700)
	if os.Geteuid() != 0 { // root writes anyway
		if n, err := h.Seen("SN1", "xid79", "b1"); n != 1 || err != nil {
			t.Errorf("repeat: %d, %v (a write was attempted?)", n, err)
		}
	}
	if st2, _ := os.Stat(p); !st2.ModTime().Equal(st.ModTime()) {
		t.Error("the record was rewritten for a boot it had")
	}
	ro := New(statefile.Dir{Path: t.TempDir(), ReadOnly: true}, "h.json")
	if n, err := ro.Seen("SN1", "xid79", "b1"); n != 1 || err != nil {
		t.Errorf("read-only: %d, %v", n, err)
	}
}

// The record stays bounded: oldest boots, then least recently seen
// problems and parts go.
func TestBounds(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	h := New(dir, "h.json")
	for i := range MaxBoots + 5 {
		if _, err := h.Seen("SN1", "xid79", fmt.Sprintf("b%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := h.Boots("SN1", "xid79"); n != MaxBoots {
		t.Errorf("boots kept %d, want %d", n, MaxBoots)
	}
	for i := range MaxProblems + 1 {
		h.Seen("SN1", fmt.Sprintf("p%d", i), "b")
	}
	if n, _ := h.Boots("SN1", "xid79"); n != 0 {
		t.Errorf("least recent problem kept (%d boots)", n)
	}
	for i := range MaxParts + 1 {
		h.Seen(fmt.Sprintf("SN-%d", i), "xid79", "b")
	}
	if n, _ := h.Boots("SN1", "p16"); n != 0 {
		t.Errorf("least recent part kept")
	}
	if n, _ := h.Boots(fmt.Sprintf("SN-%d", MaxParts), "xid79"); n != 1 {
		t.Errorf("newest part lost")
	}
	b, _ := os.ReadFile(filepath.Join(dir.Path, "h.json"))
	if len(b) > 64<<10 {
		t.Errorf("record %d bytes", len(b))
	}
}

// A corrupt record starts afresh; an unreadable one is an error.
func TestCorruptRecord(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	if err := os.WriteFile(filepath.Join(dir.Path, "h.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := New(dir, "h.json").Seen("SN1", "xid79", "b1"); n != 1 || err != nil {
		t.Errorf("corrupt: %d, %v", n, err)
	}
	if err := os.Mkdir(filepath.Join(dir.Path, "d.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := New(dir, "d.json").Seen("SN1", "xid79", "b1"); err == nil {
		t.Error("unreadable record: no error")
	}
}

func TestRecordSinceCountsTimedEpisodes(t *testing.T) {
	h := New(statefile.Dir{Path: t.TempDir()}, "h.json")
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	// A boot of the check's own escalation is on the same problem but has
	// no time: remediation's window does not count it.
	if _, err := h.Seen("SN1", "gpu.xid", "boot-a"); err != nil {
		t.Fatal(err)
	}
	for i, at := range []time.Time{t0, t0.Add(48 * time.Hour), t0.Add(96 * time.Hour)} {
		n, err := h.Record("SN1", "gpu.xid", fmt.Sprintf("r%d", i), at)
		if err != nil || n != i+2 {
			t.Fatalf("Record %d = %d, %v; want %d", i, n, err, i+2)
		}
	}
	// The same episode twice counts once.
	if n, _ := h.Record("SN1", "gpu.xid", "r2", t0.Add(96*time.Hour)); n != 4 {
		t.Errorf("repeated episode: %d episodes, want 4", n)
	}
	for _, tc := range []struct {
		since time.Time
		want  int
	}{
		{t0, 3},
		{t0.Add(time.Hour), 2},
		{t0.Add(96 * time.Hour), 1},
		{t0.Add(97 * time.Hour), 0},
	} {
		if n, err := h.Since("SN1", "gpu.xid", tc.since); err != nil || n != tc.want {
			t.Errorf("Since(%s) = %d, %v; want %d", tc.since, n, err, tc.want)
		}
	}
	if n, _ := h.Since("SN2", "gpu.xid", t0); n != 0 {
		t.Errorf("another part: %d, want 0", n)
	}
}

func TestRecordBoundsKeepTimesAligned(t *testing.T) {
	h := New(statefile.Dir{Path: t.TempDir()}, "h.json")
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range MaxBoots + 5 {
		if _, err := h.Record("SN1", "p", fmt.Sprintf("r%d", i), t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	// The oldest five went, with their times: the newest MaxBoots remain.
	if n, _ := h.Since("SN1", "p", t0); n != MaxBoots {
		t.Errorf("%d timed episodes kept, want %d", n, MaxBoots)
	}
	if n, _ := h.Since("SN1", "p", t0.Add(time.Duration(MaxBoots+4)*time.Hour)); n != 1 {
		t.Errorf("newest episode: %d, want 1", n)
	}
}
