package policy

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/gpuhc/gpuhc/internal/check"
)

// Any text (kernel lines, device strings) becomes one printable line of
// at most MaxReason bytes, and a sanitized reason is left as it is: what
// gpuhc sends is what it later reads back and compares.
func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", " a\tb\n\nc ", "\xff\xfe", "a\u00a0b\u2028c", strings.Repeat("é", 200), strings.Repeat("a", 255) + " b",
		strings.Repeat("x", 255) + "\x00" + "y", "gpuhc: host.mounts: /scratch: not mounted"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Sanitize(s)
		if len(out) > MaxReason || !utf8.ValidString(out) || strings.HasPrefix(out, " ") || strings.HasSuffix(out, " ") ||
			strings.Contains(out, "  ") || strings.ContainsFunc(out, func(r rune) bool { return r != ' ' && (unicode.IsSpace(r) || !unicode.IsPrint(r)) }) {
			t.Fatalf("Sanitize(%q) = %q", s, out)
		}
		if again := Sanitize(out); again != out {
			t.Fatalf("Sanitize(%q) = %q, then %q", s, out, again)
		}
	})
}

// A reason ParseReason accepts names a check and a component that Reason,
// given them back, writes so that they parse the same again.
func FuzzParseReason(f *testing.F) {
	for _, s := range []string{"gpuhc: host.mounts: /scratch: not mounted", "gpuhc: gpu.ecc: gpu3 (SN 1654922000003, 0000:4e:00.0): volatile DBE 2 > 0 (+2 more)",
		"gpuhc: replacing GPU 3: ticket 42", "gpuhc:", "gpuhc: a: : x", "gpuhc: a: b (c: d", "gpuhc:  x.y :  z : w", "admin: gpu.ecc: gpu0: x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reason string) {
		chk, comp, msg, ok := ParseReason(reason)
		if !ok {
			if chk != "" || comp != "" || Owned(reason) && !strings.Contains(reason, msg) {
				t.Fatalf("ParseReason(%q) refused, yet = %q, %q, %q", reason, chk, comp, msg)
			}
			return
		}
		if !Owned(reason) || !checkName.MatchString(chk) || comp == "" || strings.Contains(comp, " (") {
			t.Fatalf("ParseReason(%q) = %q, %q, %q", reason, chk, comp, msg)
		}
		again := Reason([]check.Result{{Check: chk, Component: comp, Message: msg}})
		if len(again) >= MaxReason || Sanitize(comp) != comp || strings.Contains(comp, ": ") {
			return // cut, or a component Reason must rewrite: nothing to compare
		}
		if c2, comp2, _, ok := ParseReason(again); !ok || c2 != chk || comp2 != comp {
			t.Fatalf("ParseReason(%q) = %q, %q; Reason writes %q, which parses as %q, %q, %v", reason, chk, comp, again, c2, comp2, ok)
		}
	})
}
