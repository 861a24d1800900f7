package host

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/check/checktest"
)

// Special override values for fixture.
const (
	asDir  = "\x00dir" // replace the file with a directory: reads fail with EISDIR
	remove = "\x00rm"  // delete the path
)

// fixture copies testdata/<name> into a temp dir and applies overrides
// (path relative to the root → new content, asDir or remove), so each
// fault case starts from the healthy tree and changes one thing.
func fixture(t *testing.T, name string, overrides map[string]string) string {
	t.Helper()
	root := t.TempDir()
	if name != "" {
		copyTree(t, filepath.Join("testdata", name), root)
	}
	for p, content := range overrides {
		full := filepath.Join(root, p)
		if err := os.RemoveAll(full); err != nil {
			t.Fatal(err)
		}
		switch content {
		case remove:
		case asDir:
			mustMkdir(t, full)
		default:
			mustMkdir(t, filepath.Dir(full))
			if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy fixture %s: %v", src, err)
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// want is the expected verdict on one component (see checktest.Want).
type want checktest.Want

// expect checks that rs holds exactly the components in w, with their
// statuses and message fragments, and that every result is well formed.
func expect(t *testing.T, name string, rs []check.Result, w map[string]want) {
	t.Helper()
	checktest.Expect(t, rs, w, checktest.WellFormed(name))
}

// run runs c with a generous deadline, as the runner would.
func run(t *testing.T, c check.Check) []check.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Run(ctx)
}

func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
