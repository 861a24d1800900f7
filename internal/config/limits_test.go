package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// firstProblem is the first message of Parse's error, or "" when it loads.
func firstProblem(t *testing.T, src string) string {
	t.Helper()
	_, err := Parse("f.toml", []byte(src), "n1")
	if err == nil {
		return ""
	}
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("%v is not an ErrorList", err)
	}
	return list[0].Msg
}

// TestShapeLimitsAtTheEdge puts each limit's last accepted value beside
// its first refused one: at the limit the file is judged as usual (here an
// unknown key), one past it the limit is named.
func TestShapeLimitsAtTheEdge(t *testing.T) {
	nested := func(n int) string { return "x = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n" }
	header := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("a.", n), ".") + "]\n" }
	dotted := func(n int) string { return "[t]\n" + strings.TrimSuffix(strings.Repeat("a.", n-1), ".") + " = 1\n" }
	keyOf := func(n int) string { return strings.Repeat("k", n) + " = 1\n" }
	hosts := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "[[host]]\nmatch = \"n%d\"\n", i)
		}
		return b.String()
	}
	values := func(n int) string { // n values: the key's array and n-1 elements
		return "[checks.ib]\nexclude = [" + strings.Repeat(`"mlx5_8",`, n-1) + "]\n"
	}
	tests := []struct {
		name     string
		at, past string
		atWant   string // "" loads
		pastWant string
	}{
		{"depth", nested(MaxDepth), nested(MaxDepth + 1), `unknown key "x"`, "nested more than 32 deep"},
		{"header parts", header(MaxKeyParts), header(MaxKeyParts + 1), `unknown key "a.a.a`, "more than 32 parts"},
		{"key parts with its table", dotted(MaxKeyParts), dotted(MaxKeyParts + 1), `unknown key "t"`, "a key of 33 parts"},
		{"key length", keyOf(MaxKeyLen), keyOf(MaxKeyLen + 1), "unknown key", "a key part of 257 bytes"},
		{"host sections", hosts(MaxHosts), hosts(MaxHosts + 1), "", "4097 [[host]] sections: at most 4096"},
		{"values", values(MaxValues), values(MaxValues + 1), "", "more than 100000 values"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := firstProblem(t, tc.at); !strings.Contains(got, tc.atWant) || (tc.atWant == "") != (got == "") {
				t.Errorf("at the limit: %q, want %q", got, tc.atWant)
			}
			if got := firstProblem(t, tc.past); !strings.Contains(got, tc.pastWant) || got == "" {
				t.Errorf("past the limit: %q, want %q", got, tc.pastWant)
			}
		})
	}
}

// TestErrorsAreCapped: a long value is quoted to 100 bytes with its
// length, wherever the message comes from, and a file with thousands of
// problems lists maxErrors of them and counts the rest.
func TestErrorsAreCapped(t *testing.T) {
	long := strings.Repeat("é", 5000) // two bytes a rune: the cut must not split one
	tests := []struct{ name, src, want string }{
		{"type check", "[checks.gpu]\ncount = \"" + long + "\"\n", `found string "` + strings.Repeat("é", 50) + `"… (10000 bytes)`},
		{"validation", "[checks.kernel]\ndisable = [\"" + long + "\"]\n", `"` + strings.Repeat("é", 50) + `"… (10000 bytes) is not a rule`},
		{"duration", "deadline = \"" + long + "\"\n", `found string "` + strings.Repeat("é", 50) + `"… (10000 bytes)`},
		{"host list", "[[host]]\nmatch = \"gpu[1-" + long + "]\"\n", `"gpu[1-` + strings.Repeat("é", 47) + `"… (10007 bytes)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := firstProblem(t, tc.src)
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %.300q, want it to contain %.200q", got, tc.want)
			}
			if len(got) > 4*maxQuoted+300 {
				t.Errorf("message is %d bytes", len(got))
			}
		})
	}

	var b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&b, "bogus%d = 1\n", i)
	}
	_, err := Parse("f.toml", []byte(b.String()), "n1")
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("%v", err)
	}
	if len(list) != maxErrors+1 || list[0].Line != 1 || list[maxErrors-1].Line != maxErrors {
		t.Fatalf("%d problems, first at line %d: want the first %d by line and a count", len(list), list[0].Line, maxErrors)
	}
	if last := list[maxErrors].Msg; last != "… and 2950 more problems not listed" {
		t.Errorf("last entry %q", last)
	}
}
