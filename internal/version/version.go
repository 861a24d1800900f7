// Package version carries the build's identity, set by the Makefile through
// -ldflags -X so that --version names exactly what is installed.
package version

import "fmt"

// Set at link time; the defaults mark a plain `go build`.
var (
	Version = "dev"
	Commit  = "unknown"
	Date    = "unknown"
)

// String is the one line every binary prints for --version.
func String(program string) string {
	return fmt.Sprintf("%s %s (commit %s, built %s)", program, Version, Commit, Date)
}
