package bootid

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, root, v string) {
	t.Helper()
	p := filepath.Join(root, Path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRead(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"0c6d2b3e-5c8f-4b1a-9f0e-2d7c4a1b8e93\n", "0c6d2b3e-5c8f-4b1a-9f0e-2d7c4a1b8e93", ""},
		{"0C6D2B3E-5C8F-4B1A-9F0E-2D7C4A1B8E93\n", "", "not a boot id"}, // the kernel writes lower case
		{"not-a-uuid\n", "", "not a boot id"},
		{"", "", "not a boot id"},
	} {
		root := t.TempDir()
		write(t, root, tc.in)
		got, err := Read(root)
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: %q, %v; want %q, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
	if _, err := Read(t.TempDir()); err == nil {
		t.Error("a missing boot id read as one")
	}
}

// A run's users share one read: a reboot (a new id) between two of them
// cannot make them disagree.
func TestOnceReadsOnce(t *testing.T) {
	root := t.TempDir()
	write(t, root, "0c6d2b3e-5c8f-4b1a-9f0e-2d7c4a1b8e93\n")
	o := New(root)
	first := o.ID()
	write(t, root, "11111111-2222-4333-8444-555555555555\n")
	if again, _ := o.Get(); again != first || first == "" {
		t.Errorf("first %q, then %q: one run saw two boot ids", first, again)
	}
	if fresh, _ := Read(root); fresh == first {
		t.Error("the control: a new read should see the new id")
	}
}
