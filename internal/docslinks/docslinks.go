// Package docslinks checks the relative links of the project's Markdown
// pages: README.md promises "one click" from the front page to any check's
// reference, and a page moved or a heading renamed breaks such a link
// silently. It also checks the citations of those pages in every file of
// the repository (code comments and scripts cite
// docs/architecture.md#anchor), and that nothing cites the private design
// document the project no longer depends on. Its test runs in `make test`.
package docslinks

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Link is one relative link found in a page.
type Link struct {
	File   string // the page, as given
	Line   int
	Target string // as written: path, path#anchor or #anchor
}

// inline links [text](target "title"); images too, which must resolve as well.
var linkRE = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)

// Links lists the relative links of a Markdown file, skipping fenced and
// indented code blocks and inline code spans, where brackets are code.
func Links(path string) ([]Link, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var out []Link
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced || strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t") {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripCode(line), -1) {
			t := m[1]
			if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
				continue
			}
			out = append(out, Link{File: path, Line: n, Target: t})
		}
	}
	return out, sc.Err()
}

// stripCode blanks inline code spans.
func stripCode(s string) string {
	var b strings.Builder
	in := false
	for _, r := range s {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Anchors are the heading anchors GitHub gives a Markdown file: the
// heading lower-cased, punctuation other than '-' and '_' dropped, spaces
// made '-', and a repeated anchor suffixed -1, -2, ...
func Anchors(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	seen := map[string]int{}
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimLeft(line, "#")
		if h == "" || h[0] != ' ' {
			continue
		}
		a := Slug(h)
		if k := seen[a]; k > 0 {
			out[fmt.Sprintf("%s-%d", a, k)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out, nil
}

// Slug is GitHub's anchor for a heading's text.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Broken lists the links of files that do not resolve: a missing file, or
// an anchor that no heading of the target page has.
func Broken(files []string) ([]string, error) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(p string) (map[string]bool, error) {
		if a, ok := anchors[p]; ok {
			return a, nil
		}
		a, err := Anchors(p)
		anchors[p] = a
		return a, err
	}
	var bad []string
	for _, f := range files {
		links, err := Links(f)
		if err != nil {
			return nil, err
		}
		for _, l := range links {
			path, frag, _ := strings.Cut(l.Target, "#")
			target := f
			if path != "" {
				target = filepath.Join(filepath.Dir(f), path)
			}
			st, err := os.Stat(target)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s:%d: %s: no such file", l.File, l.Line, l.Target))
				continue
			}
			if frag == "" || st.IsDir() || !strings.HasSuffix(target, ".md") {
				continue
			}
			a, err := anchorsOf(target)
			if err != nil {
				return nil, err
			}
			if !a[frag] {
				bad = append(bad, fmt.Sprintf("%s:%d: %s: no heading with that anchor in %s", l.File, l.Line, l.Target, target))
			}
		}
	}
	return bad, nil
}

// citeRE is a citation of a section of a project page in any file: the
// path docs/PAGE.md#ANCHOR, as code comments and scripts write it, not
// part of a longer path or URL (another project's docs/x.md#y).
var citeRE = regexp.MustCompile(`(?:^|[^\w./-])(docs/[\w-]+\.md)#([\p{L}\p{N}_-]+)`)

// privateRE is a citation of the private design document gpuhc was once
// built from, which no user or packager has: its file name, or the word
// design before a section sign and number. The project's own page is
// docs/architecture.md.
var privateRE = regexp.MustCompile(`design\.md|\bdesign §`)

// Files lists the repository's files under root, relative to it: what
// git tracks, plus untracked files it does not ignore. Without git (a
// source tarball) it walks root, skipping .git, dist and bin (build
// outputs).
func Files(root string) ([]string, error) {
	cmd := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if out, err := cmd.Output(); err == nil {
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, filepath.FromSlash(f))
			}
		}
		return files, nil
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir() && (rel == "dist" || rel == "bin" || d.Name() == ".git"):
			return filepath.SkipDir
		case d.Type().IsRegular() && d.Name() != ".git":
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}

// text reads a file under root for the citation scans: nil for a binary
// file (a NUL in its first 8 KiB), a symbolic link (fixture trees link
// into themselves; a target in the repository is read as itself), or a
// file listed but gone.
func text(root, file string) ([]byte, error) {
	p := filepath.Join(root, file)
	st, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if bytes.IndexByte(b[:min(len(b), 8<<10)], 0) >= 0 {
		return nil, nil
	}
	return b, nil
}

// BrokenCitations lists the docs/PAGE.md#ANCHOR citations in files
// (relative to root) whose page does not exist under root or has no
// heading with that anchor.
func BrokenCitations(root string, files []string) ([]string, error) {
	anchors := map[string]map[string]bool{}
	var bad []string
	for _, f := range files {
		b, err := text(root, f)
		if err != nil {
			return nil, err
		}
		for n, line := range strings.Split(string(b), "\n") {
			for _, m := range citeRE.FindAllStringSubmatch(line, -1) {
				page, frag := m[1], m[2]
				a, ok := anchors[page]
				if !ok {
					a, err = Anchors(filepath.Join(root, filepath.FromSlash(page)))
					if err != nil && !errors.Is(err, fs.ErrNotExist) {
						return nil, err
					}
					anchors[page] = a
				}
				switch {
				case a == nil:
					bad = append(bad, fmt.Sprintf("%s:%d: %s#%s: no such page", f, n+1, page, frag))
				case !a[frag]:
					bad = append(bad, fmt.Sprintf("%s:%d: %s#%s: no heading with that anchor", f, n+1, page, frag))
				}
			}
		}
	}
	return bad, nil
}

// PrivateCitations lists the lines of files (relative to root) that cite
// the private design document instead of the project's own pages.
func PrivateCitations(root string, files []string) ([]string, error) {
	var bad []string
	for _, f := range files {
		b, err := text(root, f)
		if err != nil {
			return nil, err
		}
		if !privateRE.Match(b) {
			continue
		}
		for n, line := range strings.Split(string(b), "\n") {
			if privateRE.MatchString(line) {
				bad = append(bad, fmt.Sprintf("%s:%d: %s", f, n+1, strings.TrimSpace(line)))
			}
		}
	}
	return bad, nil
}
