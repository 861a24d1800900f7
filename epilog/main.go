// Command gpuhc-epilog: slurmd's Epilog: post-job GPU checks.
package main

import (
	"os"

	"github.com/gpuhc/gpuhc/internal/stub"
)

func main() {
	os.Exit(stub.Main("gpuhc-epilog", "slurmd's Epilog: post-job GPU checks.", os.Args[1:], os.Stdout, os.Stderr))
}
