// Command gpuhc-prolog is slurmd's Prolog: fast GPU checks before a job
// starts.
package main

import (
	"os"
	"time"

	"github.com/gpuhc/gpuhc/internal/prolog"
)

func main() {
	os.Exit(prolog.Program{
		Args:     os.Args[1:],
		Getenv:   os.Getenv,
		Hostname: os.Hostname,
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		Exit:     os.Exit,
		Now:      time.Now,
	}.Main())
}
