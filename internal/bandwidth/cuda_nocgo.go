//go:build !cgo

package bandwidth

import "errors"

// openCUDA without cgo: the static binaries cannot dlopen the driver, so
// the in-process measurement reports that it could not run (an ERROR,
// never a FAIL) and the tool wrappers still work.
func openCUDA(path string) (cudaAPI, error) {
	return nil, &loadError{Path: path, Msg: "not available: gpuhc was built without cgo", err: errors.ErrUnsupported}
}
