//go:build !cgo

package bandwidth

import (
	"context"
	"slices"
	"testing"
)

// Built without cgo, the in-process measurement cannot run: it says so
// (ERROR, never FAIL) and the tools still run.
func TestNoCgo(t *testing.T) {
	c := testConfig()
	_, rs := Measure(context.Background(), c, nil)
	if got := summary(rs); !slices.Equal(got, []string{"host ERROR libcuda.so.1: not available: gpuhc was built without cgo"}) {
		t.Errorf("got %q", got)
	}
}
