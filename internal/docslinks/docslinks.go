// Package docslinks checks the relative links of the project's Markdown
// pages: README.md promises "one click" from the front page to any check's
// reference, and a page moved or a heading renamed breaks such a link
// silently. Its test runs in `make test`.
package docslinks

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
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
