// Command gpuhc-drain is the admin's command line: list, drain, resume,
// history and stats (MTTF/MTTR).
package main

import (
	"os"

	"github.com/gpuhc/gpuhc/internal/drainctl"
)

func main() {
	os.Exit(drainctl.Program{
		Args:     os.Args[1:],
		Getenv:   os.Getenv,
		Hostname: os.Hostname,
		Stdin:    os.Stdin,
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		StderrIsTerminal: func() bool {
			fi, err := os.Stderr.Stat()
			return err == nil && fi.Mode()&os.ModeCharDevice != 0
		},
	}.Main())
}
