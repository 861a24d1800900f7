// Command gpuhc-healthcheck is slurmd's HealthCheckProgram.
package main

import (
	"os"
	"time"

	"github.com/gpuhc/gpuhc/internal/healthcheck"
)

func main() {
	os.Exit(healthcheck.Program{
		Args:     os.Args[1:],
		Getenv:   os.Getenv,
		Hostname: os.Hostname,
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		Exit:     os.Exit,
		Now:      time.Now,
	}.Main())
}
