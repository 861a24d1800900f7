// Command gpuhc-healthcheck is slurmd's HealthCheckProgram.
package main

import (
	"os"

	"github.com/gpuhc/gpuhc/internal/healthcheck"
	"github.com/gpuhc/gpuhc/internal/runenv"
)

func main() {
	os.Exit(healthcheck.Program{Process: runenv.OS()}.Main())
}
