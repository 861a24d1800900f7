package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	path := filepath.Join(dir, "f.json")
	for _, body := range []string{"one\n", "two\n"} {
		if err := Write(path, []byte(body), State(".f-*")); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != body {
			t.Errorf("content %q, want %q", b, body)
		}
	}
	fi, _ := os.Stat(path)
	di, _ := os.Stat(dir)
	if fi.Mode().Perm() != 0o640 || di.Mode().Perm() != 0o750 {
		t.Errorf("modes %v %v", fi.Mode().Perm(), di.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temp files left: %v", ents)
	}
}

func TestWriteFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := Write(path, []byte("old"), State(".f-*")); err != nil {
		t.Fatal(err)
	}
	// A directory where the file should go makes the rename fail.
	bad := filepath.Join(dir, "sub")
	os.Mkdir(bad, 0o755)
	if err := Write(bad, []byte("new"), State(".f-*")); err == nil {
		t.Fatal("rename over a directory succeeded")
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("old file changed: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("temp file left behind: %v", ents)
	}
}
