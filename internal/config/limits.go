package config

import (
	"fmt"
	"unicode/utf8"
)

// Shape limits. gpuhc's own schema needs keys of at most 6 parts and
// about 50 bytes, and values nested 4 deep ([[host]] inline arrays of
// tables of arrays); a file that goes far past that is a mistake or an
// attack, and refusing it up front keeps every later step (the TOML
// decoder included, whose cost grows with depth squared) linear in the
// file's size. Each limit is in the error message when it is hit.
const (
	MaxDepth    = 32      // arrays and inline tables nested inside one another
	MaxKeyParts = 32      // parts of one dotted key, its table's included
	MaxKeyLen   = 256     // bytes of one key, dotted and quoted as in errors
	MaxKeys     = 50_000  // key occurrences in the file
	MaxValues   = 100_000 // values, each array element counted
	MaxHosts    = 4096    // [[host]] sections; a match takes host ranges
	maxErrors   = 50      // problems listed; the rest are counted
	maxQuoted   = 100     // bytes of a quoted value in an error
)

// shapeError is a file past one of the shape limits.
type shapeError struct {
	line int
	msg  string
}

func (e *shapeError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// capped stands in for a long string argument of an error message. Quoted
// (%q, how a value from the file is shown), it is cut to 100 bytes and its
// length, so that a 10 MB value is not a 10 MB line in slurmd's log on
// every interval; with any other verb it is text gpuhc built (a list of
// known names) and is printed whole.
type capped string

func (c capped) Format(f fmt.State, verb rune) {
	s := string(c)
	if verb != 'q' {
		fmt.Fprint(f, s)
		return
	}
	fmt.Fprintf(f, "%q… (%d bytes)", cutRunes(s, maxQuoted), len(s))
}

// capArgs replaces every long string argument with its capped form.
func capArgs(args []any) []any {
	out, copied := args, false
	for i, a := range args {
		if s, ok := a.(string); ok && len(s) > maxQuoted {
			if !copied {
				out, copied = append([]any(nil), args...), true
			}
			out[i] = capped(s)
		}
	}
	return out
}

// capMsg is the backstop for text that reached a message by another
// route (a wrapped error, the decoder's own message): at most 4 quoted
// values' worth, then the length.
func capMsg(msg string) string {
	const limit = 4*maxQuoted + 200
	if len(msg) <= limit {
		return msg
	}
	return fmt.Sprintf("%s… (%d bytes in all)", cutRunes(msg, limit), len(msg))
}

// cutRunes is s cut to at most n bytes, not inside a UTF-8 sequence.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// errorf is fmt.Errorf with long quoted values capped, for the parsers
// (host lists, sizes, pairs) whose errors quote what the file said.
func errorf(format string, args ...any) error { return fmt.Errorf(format, capArgs(args)...) }
