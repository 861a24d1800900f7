// Package configtest builds hostile configuration files: the shapes that
// once made loading quadratic in time or memory, or bloated its errors
// (issue 13). The config tests load them, and `make bench` times the
// binary on each.
package configtest

import (
	"fmt"
	"strings"

	"github.com/gpuhc/gpuhc/internal/config"
)

// Shapes names every shape Shape builds.
var Shapes = []string{
	"unknown-keys", "known-keys", "hosts-at-cap", "keys-at-cap", "long-array",
	"deep-array", "deep-inline", "deep-header", "long-string", "long-key",
}

// Shape is a TOML document of the named shape, about size bytes long
// (the -at-cap shapes are sized by the limit they sit at instead).
func Shape(shape string, size int) string {
	var b strings.Builder
	switch shape {
	case "unknown-keys": // one unknown key per line
		for i := 0; b.Len() < size; i++ {
			fmt.Fprintf(&b, "k%07d = 1\n", i)
		}
	case "known-keys": // a valid key set again and again in [[host]] sections
		for i := 0; b.Len() < size; i++ {
			fmt.Fprintf(&b, "[[host]]\nmatch = \"n%d\"\ndeadline = \"30s\"\n", i)
		}
	case "hosts-at-cap": // config.MaxHosts sections, each setting a few keys
		for i := 0; i < config.MaxHosts; i++ {
			fmt.Fprintf(&b, "[[host]]\nmatch = \"n%d\"\ndeadline = \"30s\"\n[host.checks.gpu.count]\nexpected = 8\n", i)
		}
	case "keys-at-cap": // config.MaxKeys unknown keys
		for i := 0; i < config.MaxKeys; i++ {
			fmt.Fprintf(&b, "k%07d = 1\n", i)
		}
	case "long-array": // one known array of size bytes
		b.WriteString("[checks.ib]\nexclude = [")
		for b.Len() < size {
			b.WriteString(`"mlx5_8",`)
		}
		b.WriteString("]\n")
	case "deep-array": // x = [[[[ ... ]]]]
		n := size / 2
		b.WriteString("x = ")
		b.WriteString(strings.Repeat("[", n))
		b.WriteString(strings.Repeat("]", n))
		b.WriteString("\n")
	case "deep-inline": // x = {a={a={ ... }}}
		n := size / 4
		b.WriteString("x = ")
		b.WriteString(strings.Repeat("{a=", n))
		b.WriteString("1")
		b.WriteString(strings.Repeat("}", n))
		b.WriteString("\n")
	case "deep-header": // [a.a.a. ... .a]
		n := size / 2
		b.WriteString("[a")
		b.WriteString(strings.Repeat(".a", n))
		b.WriteString("]\n")
	case "long-string": // a wrong-typed value of size bytes
		b.WriteString("[checks.gpu]\ncount = \"")
		b.WriteString(strings.Repeat("x", size))
		b.WriteString("\"\n")
	case "long-key":
		b.WriteString(strings.Repeat("k", size))
		b.WriteString(" = 1\n")
	default:
		panic("unknown shape " + shape)
	}
	return b.String()
}
