package statefile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
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
