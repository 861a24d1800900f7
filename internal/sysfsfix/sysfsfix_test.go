package sysfsfix

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/<tree> from the generator")

var allTrees = []string{H100NDR, A100HDR, RoCE, B200}

// snapshot reads a tree as path -> "f:"+content or "l:"+link target.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "l:" + target
		case d.IsDir():
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "f:" + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCommittedTreesMatchGenerator(t *testing.T) {
	for _, name := range allTrees {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			committed := filepath.Join("testdata", name)
			if *update {
				if err := os.RemoveAll(committed); err != nil {
					t.Fatal(err)
				}
				if err := Write(committed, name); err != nil {
					t.Fatal(err)
				}
			}
			gen := scratch(t)
			if err := Write(gen, name); err != nil {
				t.Fatal(err)
			}
			want, got := snapshot(t, gen), snapshot(t, committed)
			for p, w := range want {
				if g, ok := got[p]; !ok {
					t.Errorf("%s: missing from testdata", p)
				} else if g != w {
					t.Errorf("%s: testdata has %q, generator writes %q", p, g, w)
				}
			}
			for p := range got {
				if _, ok := want[p]; !ok {
					t.Errorf("%s: in testdata, not written by the generator", p)
				}
			}
			if t.Failed() {
				t.Log("regenerate with: go test ./internal/sysfsfix -update")
			}
		})
	}
}

func TestWriteUnknownTree(t *testing.T) {
	if err := Write(t.TempDir(), "dgx-z900"); err == nil || !strings.Contains(err.Error(), "unknown tree") {
		t.Errorf("Write(unknown) = %v, want an unknown-tree error", err)
	}
}
