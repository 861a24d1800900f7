// Command gpuhc-prolog: slurmd's Prolog: fast GPU checks before a job starts.
package main

import (
	"os"

	"github.com/gpuhc/gpuhc/internal/stub"
)

func main() {
	os.Exit(stub.Main("gpuhc-prolog", "slurmd's Prolog: fast GPU checks before a job starts.", os.Args[1:], os.Stdout, os.Stderr))
}
