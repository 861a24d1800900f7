package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem found in a configuration. Load returns them in an
// ErrorList so that an admin sees every mistake in one run.
type Error struct {
	File string // "" when the configuration did not come from a file
	Line int    // 1-based; 0 when unknown, e.g. for a default value
	Key  string // full dotted key, e.g. "checks.mounts.mount.path"; "" for syntax errors
	Msg  string // complete message; it names the key itself
}

// Error formats the problem as "file:line: msg", dropping what is unknown.
func (e *Error) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	case e.File != "":
		return e.File + ": " + e.Msg
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// ErrorList holds every problem found in one configuration, ordered by line.
type ErrorList []*Error

// Error prints one problem per line.
func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap lets errors.As find the individual *Error values.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// errOrNil sorts and de-duplicates the list, and returns a nil error (not a
// typed nil) when it is empty.
func (l ErrorList) errOrNil() error {
	if len(l) == 0 {
		return nil
	}
	l = l.sorted()
	return l
}

// sorted orders problems by line, those without a line last, and drops
// exact repeats (the same problem can surface from several host sections).
func (l ErrorList) sorted() ErrorList {
	out := slices.Clone(l)
	slices.SortStableFunc(out, func(a, b *Error) int {
		return cmp.Compare(lineKey(a.Line), lineKey(b.Line))
	})
	seen := map[string]bool{}
	return slices.DeleteFunc(out, func(e *Error) bool {
		s := e.Error()
		dup := seen[s]
		seen[s] = true
		return dup
	})
}

func lineKey(n int) int {
	if n <= 0 {
		return int(^uint(0) >> 1)
	}
	return n
}
