// Package stub is the placeholder entry point shared by the binaries whose
// issues have not landed yet (prolog, epilog, drain): they parse the common
// flags, so packaging and slurm.conf wiring can be tried, and say plainly
// that they do nothing yet.
package stub

import (
	"flag"
	"fmt"
	"io"

	"github.com/gpuhc/gpuhc/internal/version"
)

// Main parses --version, --help and --dry-run, then prints "not yet".
// It exits 0 so that wiring an early Prolog/Epilog never drains a node.
func Main(program, purpose string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	fs.SetOutput(stderr)
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Bool("dry-run", false, "change nothing (no effect yet)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s [--dry-run] [--version]\n\n%s\nNot implemented yet.\n\nOptions:\n", program, purpose)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.String(program))
		return 0
	}
	fmt.Fprintf(stdout, "%s: not yet implemented; doing nothing\n", program)
	return 0
}
