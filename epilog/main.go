// Command gpuhc-epilog is slurmd's Epilog: what happened to the GPUs
// during the job, and what the job left on them.
package main

import (
	"os"

	"github.com/gpuhc/gpuhc/internal/epilog"
	"github.com/gpuhc/gpuhc/internal/runenv"
)

func main() {
	os.Exit(epilog.Program{Process: runenv.OS()}.Main())
}
