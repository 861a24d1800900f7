// Command gpuhc-epilog is slurmd's Epilog: what happened to the GPUs
// during the job, and what the job left on them.
package main

import (
	"os"
	"time"

	"github.com/gpuhc/gpuhc/internal/epilog"
)

func main() {
	os.Exit(epilog.Program{
		Args:     os.Args[1:],
		Getenv:   os.Getenv,
		Hostname: os.Hostname,
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		Exit:     os.Exit,
		Now:      time.Now,
	}.Main())
}
