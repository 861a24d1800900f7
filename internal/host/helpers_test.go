package host

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
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

// want is the expected verdict on one component. Message must contain
// msg (empty: anything).
type want struct {
	status check.Status
	msg    string
}

// expect checks that rs holds exactly the components in w, with their
// statuses and message fragments, and the invariants every result keeps.
func expect(t *testing.T, name string, rs []check.Result, w map[string]want) {
	t.Helper()
	got := map[string]check.Result{}
	for _, r := range rs {
		if _, dup := got[r.Component]; dup {
			t.Errorf("component %q reported twice", r.Component)
		}
		got[r.Component] = r
		checkInvariants(t, name, r)
	}
	for comp, wr := range w {
		r, ok := got[comp]
		if !ok {
			t.Errorf("no result for %q; got %v", comp, rs)
			continue
		}
		if r.Status != wr.status || !strings.Contains(r.Message, wr.msg) {
			t.Errorf("%s: got %v %q, want %v containing %q", comp, r.Status, r.Message, wr.status, wr.msg)
		}
	}
	for comp, r := range got {
		if _, ok := w[comp]; !ok {
			t.Errorf("unexpected result %s: %v %q", comp, r.Status, r.Message)
		}
	}
}

// checkInvariants holds for every result any host check returns: it is
// stamped, one printable line, and only FAIL asks for a drain.
func checkInvariants(t *testing.T, name string, r check.Result) {
	t.Helper()
	if r.Check != name {
		t.Errorf("%s: check name %q, want %q", r.Component, r.Check, name)
	}
	if r.Component == "" || r.Message == "" {
		t.Errorf("empty component or message: %+v", r)
	}
	if printable(r.Message) != r.Message || printable(r.Component) != r.Component {
		t.Errorf("not one printable line: %+v", r)
	}
	if (r.Status == check.Fail) != (r.Action == check.ActionDrain) {
		t.Errorf("%s: status %v with action %q", r.Component, r.Status, r.Action)
	}
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
