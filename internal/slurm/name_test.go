package slurm

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"gpu001", "vm", "node-1.rack_2", "A9", "_x"} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	bad := []string{"", "-o", ".", "..", ".hidden", "a/b", "a b", "gpu[1-2]", "a,b",
		"x\nState=DOWN", "a%2f", "a?b", "a#b", "ä", strings.Repeat("a", 256)}
	for _, b := range bad {
		if err := ValidateName(b); !errors.Is(err, ErrInvalidName) {
			t.Errorf("%q: %v", b, err)
		}
	}
}

func TestCheckReason(t *testing.T) {
	if err := checkReason("gpuhc: gpu: gpu3: xid 79 $(reboot); rm -rf /"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "   ", "a\nb", "a\rb", "tab\there", "del\x7f"} {
		if err := checkReason(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
