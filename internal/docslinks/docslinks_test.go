package docslinks

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestProjectDocsLinksResolve(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	if len(files) < 5 {
		t.Fatalf("found only %v: run from internal/docslinks", files)
	}
	bad, err := Broken(files)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		" Quick start":                                       "quick-start",
		" The kernel log: one pass, three rules":             "the-kernel-log-one-pass-three-rules",
		" Job boundaries: prolog, epilog and `--gpu-health`": "job-boundaries-prolog-epilog-and---gpu-health",
		" [checks.processes] required":                       "checksprocesses-required",
		" gpu_xid":                                           "gpu_xid",
		"[checks.processes]":                                 "checksprocesses",
		"[[checks.mounts.mount]]":                            "checksmountsmount",
		"Top-level keys":                                     "top-level-keys",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBrokenFindsMissingFilesAndAnchors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("b.md", "# Title\n## Same\n## Same\n")
	a := write("a.md", strings.Join([]string{
		"[ok](b.md#title) [dup](b.md#same-1) [self](#top-heading)",
		"# Top heading",
		"[gone](c.md) [bad anchor](b.md#nope) [web](https://example.com/x.md)",
		"`[code](nowhere.md)`",
		"```",
		"[fenced](nowhere.md)",
		"```",
		"    [indented](nowhere.md)",
	}, "\n"))
	bad, err := Broken([]string{a})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"c.md: no such file", "b.md#nope: no heading"}
	if len(bad) != len(want) {
		t.Fatalf("broken = %q, want %d entries", bad, len(want))
	}
	for _, w := range want {
		if !slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(b, w) }) {
			t.Errorf("broken = %q, want one containing %q", bad, w)
		}
	}
}

// repoFiles are the repository's files, for the citation tests.
func repoFiles(t *testing.T) []string {
	t.Helper()
	files, err := Files("../..")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, filepath.Join("docs", "architecture.md")) || len(files) < 100 {
		t.Fatalf("found %d files, without docs/architecture.md: run from internal/docslinks", len(files))
	}
	return files
}

// Code comments and scripts cite docs/architecture.md#anchor (and other
// pages' sections): each must name a heading that exists.
// This package's own files are left out: their examples cite pages that
// do not exist on purpose.
func TestProjectCitationsResolve(t *testing.T) {
	files := slices.DeleteFunc(repoFiles(t), func(f string) bool {
		return strings.HasPrefix(filepath.ToSlash(f), "internal/docslinks/")
	})
	bad, err := BrokenCitations("../..", files)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// No file may cite the private design document: the project carries its
// own architecture page, docs/architecture.md.
func TestNoPrivateDesignCitations(t *testing.T) {
	bad, err := PrivateCitations("../..", repoFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("%s: cite docs/architecture.md#<anchor> or state the fact", b)
	}
}

func TestCitationScans(t *testing.T) {
	root := t.TempDir()
	write := func(name, body string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/arch.md", "# Arch\n## Storm guard\n")
	write("a.go", strings.Join([]string{
		"// ok (docs/arch.md#storm-guard), bad anchor docs/arch.md#nope,",
		"// no page docs/gone.md#x, another project's github.com/o/r/docs/x.md#y",
		"// and ../docs/arch.md#nope2 is a relative path, not a citation",
		"// see " + "design" + ".md §6 and the " + "design" + " §2 rule",
	}, "\n"))
	write("bin.dat", "docs/gone.md#x "+"design"+".md\x00")
	if err := os.Symlink("a.go", filepath.Join(root, "link.go")); err != nil {
		t.Fatal(err)
	}
	files := []string{"a.go", "bin.dat", "link.go", "vanished.go"}
	bad, err := BrokenCitations(root, files)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a.go:1: docs/arch.md#nope: no heading", "a.go:2: docs/gone.md#x: no such page"}
	if len(bad) != len(want) {
		t.Fatalf("broken = %q, want %d entries", bad, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(bad[i], w) {
			t.Errorf("broken[%d] = %q, want %q...", i, bad[i], w)
		}
	}
	priv, err := PrivateCitations(root, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(priv) != 1 || !strings.HasPrefix(priv[0], "a.go:4: ") {
		t.Errorf("private = %q, want a.go:4 only", priv)
	}
}

// Without git, Files walks the tree, skipping .git and the build outputs.
func TestFilesWalkWithoutGit(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"README.md", "docs/a.md", ".git/config", "dist/x.deb", "bin/gpuhc-drain", "internal/bin/keep.go"} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", "") // no git
	files, err := Files(root)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	want := []string{"README.md", filepath.Join("docs", "a.md"), filepath.Join("internal", "bin", "keep.go")}
	if !slices.Equal(files, want) {
		t.Errorf("files = %q, want %q", files, want)
	}
}
