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
