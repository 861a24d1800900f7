package statefile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/sysread"
)

func TestLoadSave(t *testing.T) {
	d := Dir{Path: filepath.Join(t.TempDir(), "state")}
	var v map[string]int
	if err := d.Load("x.json", &v); err != nil || v != nil {
		t.Fatalf("missing record: %v %v", v, err)
	}
	if err := d.Save("x.json", map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := d.Load("x.json", &v); err != nil || v["a"] != 1 {
		t.Fatalf("round trip: %v %v", v, err)
	}
	ro := Dir{Path: d.Path, ReadOnly: true}
	if err := ro.Save("x.json", map[string]int{"a": 2}); err != nil {
		t.Fatal(err)
	}
	if err := d.Load("x.json", &v); err != nil || v["a"] != 1 {
		t.Errorf("read-only dir saved: %v", v)
	}
	os.WriteFile(filepath.Join(d.Path, "x.json"), []byte("{"), 0o600)
	if err := d.Load("x.json", &v); !errors.Is(err, ErrCorrupt) {
		t.Errorf("corrupt: %v", err)
	}
}

// A record that is not a regular file is an error at once, never a hang.
func TestLoadFIFOIsAnError(t *testing.T) {
	d := Dir{Path: t.TempDir()}
	if err := syscall.Mkfifo(filepath.Join(d.Path, "gpu-xid.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { var v map[string]any; done <- d.Load("gpu-xid.json", &v) }()
	select {
	case err := <-done:
		if !errors.Is(err, sysread.ErrNotRegular) {
			t.Errorf("got %v, want ErrNotRegular", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Load blocked on a FIFO")
	}
}
