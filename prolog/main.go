// Command gpuhc-prolog is slurmd's Prolog: fast GPU checks before a job
// starts.
package main

import (
	"os"

	"github.com/gpuhc/gpuhc/internal/prolog"
	"github.com/gpuhc/gpuhc/internal/runenv"
)

func main() {
	os.Exit(prolog.Program{Process: runenv.OS()}.Main())
}
