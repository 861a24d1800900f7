package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// keyPos is where one key occurs in a TOML document.
type keyPos struct {
	key  string // dotted, spelled as toml.Key.String() spells it
	inst string // the same with [n] after each array entry: "host[1].checks.mounts.mount[0].path"
	line int
}

// keyScanner finds the line of every key in a TOML document. BurntSushi's
// MetaData lists keys without positions, and keeps one position per dotted
// key even when [[arrays]] repeat it, so error messages need this to name a
// line. It runs only on documents that already parsed, so it need only be
// right on valid TOML; on anything else it must merely not stall.
type keyScanner struct {
	src     string
	i       int
	line    int
	table   toml.Key       // key of the current [table] or [[array]] header
	inst    string         // its instance path
	entries map[string]int // [[array]] entries seen so far, by instance path
	out     []keyPos
	depth   int   // arrays and inline tables open around the scanner
	values  int   // values seen so far
	err     error // the first shape limit broken; scanning stops there
}

// scanKeys lists every key, table header and inline-table key in src. It
// also enforces the shape limits (limits.go), and stops at the first one
// broken: every step it takes is bounded by them, so the scan is linear in
// the size of src.
func scanKeys(src string) ([]keyPos, error) {
	s := &keyScanner{src: strings.TrimPrefix(src, "\ufeff"), line: 1, entries: map[string]int{}}
	for s.skipSpace(true); s.i < len(s.src) && s.err == nil; s.skipSpace(true) {
		start := s.i
		switch {
		case s.has("[["):
			s.header(true)
		case s.has("["):
			s.header(false)
		default:
			s.keyValue(s.table, s.inst)
		}
		if s.i == start {
			s.advance()
		}
	}
	return s.out, s.err
}

func (s *keyScanner) has(p string) bool { return strings.HasPrefix(s.src[s.i:], p) }

func (s *keyScanner) advance() {
	if s.i < len(s.src) {
		if s.src[s.i] == '\n' {
			s.line++
		}
		s.i++
	}
}

// skipSpace skips blanks and comments, and newlines too when asked.
func (s *keyScanner) skipSpace(newlines bool) {
	for s.i < len(s.src) {
		switch c := s.src[s.i]; {
		case c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n'):
			s.advance()
		case c == '#':
			for s.i < len(s.src) && s.src[s.i] != '\n' {
				s.i++
			}
		default:
			return
		}
	}
}

func (s *keyScanner) header(array bool) {
	line, width := s.line, 1
	if array {
		width = 2
	}
	s.i += width
	parts := s.key()
	s.skipSpace(false)
	s.i = min(s.i+width, len(s.src))
	if len(parts) == 0 {
		return
	}
	inst := s.instOf(parts)
	if array {
		arr := join(s.instOf(parts[:len(parts)-1]), parts[len(parts)-1])
		s.entries[arr]++
		inst = fmt.Sprintf("%s[%d]", arr, s.entries[arr]-1)
	}
	s.table, s.inst = parts, inst
	s.record(parts, inst, line)
}

// instOf adds the current entry index after every array-of-tables prefix.
func (s *keyScanner) instOf(parts []string) string {
	cur := ""
	for _, p := range parts {
		cur = join(cur, p)
		if n := s.entries[cur]; n > 0 {
			cur = fmt.Sprintf("%s[%d]", cur, n-1)
		}
	}
	return cur
}

func join(base string, parts ...string) string {
	for _, p := range parts {
		q := toml.Key{p}.String()
		if base == "" {
			base = q
		} else {
			base += "." + q
		}
	}
	return base
}

func (s *keyScanner) record(parts []string, inst string, line int) {
	key := toml.Key(parts).String()
	switch {
	case len(parts) > MaxKeyParts:
		s.fail(line, "a key of %d parts (%.40s…): at most %d", len(parts), key, MaxKeyParts)
	case len(key) > MaxKeyLen:
		s.fail(line, "a key of %d bytes (%.40s…): at most %d", len(key), key, MaxKeyLen)
	case len(s.out) == MaxKeys:
		s.fail(line, "more than %d keys", MaxKeys)
	default:
		s.out = append(s.out, keyPos{key: key, inst: inst, line: line})
	}
}

func (s *keyScanner) fail(line int, format string, args ...any) {
	if s.err == nil {
		s.err = &shapeError{line: line, msg: fmt.Sprintf(format, args...)}
	}
	s.i = len(s.src)
}

// keyValue reads "a.b = value" inside the table whose key and instance
// path are given.
func (s *keyScanner) keyValue(table toml.Key, inst string) {
	line := s.line
	parts := s.key()
	s.skipSpace(false)
	if len(parts) == 0 || !s.has("=") {
		return
	}
	s.i++
	full := append(slices.Clone(table), parts...)
	if len(full) > MaxKeyParts {
		s.fail(line, "a key of %d parts (%.40s…): at most %d", len(full), full.String(), MaxKeyParts)
		return
	}
	fullInst := join(inst, parts...)
	s.record(full, fullInst, line)
	if s.err != nil {
		return
	}
	s.skipSpace(false)
	s.value(full, fullInst)
}

// key reads a possibly dotted key of bare, "basic" and 'literal' parts.
func (s *keyScanner) key() []string {
	var parts []string
	for {
		s.skipSpace(false)
		p, ok := s.keyPart()
		if !ok {
			return parts
		}
		if len(p) > MaxKeyLen {
			s.fail(s.line, "a key part of %d bytes (%.40s…): at most %d", len(p), p, MaxKeyLen)
			return nil
		}
		if parts = append(parts, p); len(parts) > MaxKeyParts {
			s.fail(s.line, "a key of more than %d parts (%.40s…)", MaxKeyParts, toml.Key(parts).String())
			return nil
		}
		s.skipSpace(false)
		if !s.has(".") {
			return parts
		}
		s.i++
	}
}

func (s *keyScanner) keyPart() (string, bool) {
	start := s.i
	switch {
	case s.has(`"`):
		s.i++
		s.skipString('"', true)
		raw := s.src[start:s.i]
		if u, err := strconv.Unquote(raw); err == nil {
			return u, true
		}
		return strings.Trim(raw, `"`), true
	case s.has("'"):
		s.i++
		s.skipString('\'', false)
		return strings.Trim(s.src[start:s.i], "'"), true
	}
	for s.i < len(s.src) && isBare(s.src[s.i]) {
		s.i++
	}
	return s.src[start:s.i], s.i > start
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// skipString moves past a one-line string whose opening quote is consumed.
func (s *keyScanner) skipString(q byte, escapes bool) {
	for s.i < len(s.src) && s.src[s.i] != q && s.src[s.i] != '\n' {
		if escapes && s.src[s.i] == '\\' && s.i+1 < len(s.src) {
			s.i++ // a '\' that ends the file escapes nothing
		}
		s.i++
	}
	if s.i < len(s.src) && s.src[s.i] == q {
		s.i++
	}
}

// value skips a value, recording the keys of any inline tables in it.
func (s *keyScanner) value(key toml.Key, inst string) {
	if s.values++; s.values > MaxValues {
		s.fail(s.line, "more than %d values", MaxValues)
		return
	}
	switch {
	case s.has(`"""`):
		s.skipMultiline(`"""`, true)
	case s.has("'''"):
		s.skipMultiline("'''", false)
	case s.has(`"`):
		s.i++
		s.skipString('"', true)
	case s.has("'"):
		s.i++
		s.skipString('\'', false)
	case s.has("["):
		s.array(key, inst)
	case s.has("{"):
		s.inline(key, inst)
	default:
		for s.i < len(s.src) && !strings.ContainsRune(",]}#\n", rune(s.src[s.i])) {
			s.i++
		}
	}
}

func (s *keyScanner) skipMultiline(delim string, escapes bool) {
	s.i += len(delim)
	for s.i < len(s.src) {
		switch {
		case escapes && s.src[s.i] == '\\':
			s.advance()
			s.advance()
		case s.has(delim):
			s.i += len(delim)
			// Up to two more quotes belong to the content: """a""""".
			for n := 0; n < 2 && s.i < len(s.src) && s.src[s.i] == delim[0]; n++ {
				s.i++
			}
			return
		default:
			s.advance()
		}
	}
}

// array skips [v, v, ...]; inline tables in it get an [n] instance index.
func (s *keyScanner) array(key toml.Key, inst string) {
	if !s.enter() {
		return
	}
	defer s.leave()
	s.i++
	for n := 0; s.err == nil; {
		s.skipSpace(true)
		if s.i >= len(s.src) || s.has("]") {
			s.i = min(s.i+1, len(s.src))
			return
		}
		start := s.i
		elem := "" // a scalar needs no instance path; building one per element would cost O(len(inst)) each
		if s.has("{") || s.has("[") {
			elem = fmt.Sprintf("%s[%d]", inst, n)
		}
		s.value(key, elem)
		s.skipSpace(true)
		if s.has(",") {
			s.i++
			n++
		} else if s.i == start {
			s.advance()
		}
	}
}

// inline skips {k = v, ...}, recording each key.
func (s *keyScanner) inline(key toml.Key, inst string) {
	if !s.enter() {
		return
	}
	defer s.leave()
	s.i++
	for s.err == nil {
		s.skipSpace(true)
		switch {
		case s.i >= len(s.src):
			return
		case s.has("}"):
			s.i++
			return
		case s.has(","):
			s.i++
			continue
		}
		start := s.i
		s.keyValue(key, inst)
		if s.i == start {
			s.advance()
		}
	}
}

// enter opens an array or inline table, within MaxDepth.
func (s *keyScanner) enter() bool {
	if s.depth++; s.depth > MaxDepth {
		s.fail(s.line, "arrays and inline tables nested more than %d deep", MaxDepth)
		return false
	}
	return true
}

func (s *keyScanner) leave() { s.depth-- }
