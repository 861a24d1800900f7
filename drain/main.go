// Command gpuhc-drain: The admin's view of drains, and MTTF/MTTR statistics.
package main

import (
	"os"

	"github.com/gpuhc/gpuhc/internal/stub"
)

func main() {
	os.Exit(stub.Main("gpuhc-drain", "The admin's view of drains, and MTTF/MTTR statistics.", os.Args[1:], os.Stdout, os.Stderr))
}
