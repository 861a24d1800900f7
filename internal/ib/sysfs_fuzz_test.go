package ib

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func seedGlob(f *testing.F, pattern string) {
	paths, _ := filepath.Glob(pattern)
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
}

// Any VPD (vendors get it wrong): read from memory it never fails, and a
// device is a switch management function only if its VPD holds the marker.
func FuzzScanVPD(f *testing.F) {
	seedGlob(f, "../sysfsfix/testdata/b200/sys/devices/*/*/*/vpd")
	marker := [2]string{"VA", "MLX:MN=MLNX:SMDL=SW_MNG"}
	f.Add(vpdBytes("ConnectX-7", [][2]string{marker}, nil, true))
	f.Add(vpdBytes("SMDL=SW_MNG", [][2]string{{"PN", "x"}}, [][2]string{marker}, false))
	f.Add([]byte{0x90, 0xff, 0xff, 'V', 'A', 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		found, err := scanVPD(io.LimitReader(bytes.NewReader(b), maxVPD))
		if err != nil || found && !bytes.Contains(b[:min(len(b), maxVPD)], []byte(swMngMarker)) {
			t.Fatalf("scanVPD(%q) = %v, %v", b, found, err)
		}
	})
}

// Any port attribute: a state is a short name, a rate a finite
// non-negative figure from one printable line.
func FuzzPortAttrs(f *testing.F) {
	for _, a := range []string{"rate", "state", "phys_state"} {
		seedGlob(f, "testdata/real/*/sys/devices/*/*/infiniband/*/ports/*/"+a)
	}
	for _, s := range []string{"400 Gb/sec (4X NDR)", "0 GB/sec", "2.5 Gb/sec (1X SDR)", "NaN Gb/sec", "1e7 Gb/sec", "-0 Gb/sec", "4: ACTIVE", "7: Phy Test", "0: <unknown>", "1: \x00"} {
		f.Add([]byte(s + "\n"))
	}
	p := filepath.Join(f.TempDir(), "attr")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if text, v, err := readRate(p); err == nil && (!(v >= 0 && v <= 1e6) || math.IsInf(v, 0) || !printableValue(text) || strings.Contains(text, "\n")) {
			t.Fatalf("readRate(%q) = %q, %v", b, text, v)
		}
		if name, err := readEnumAttr(p); err == nil && (name == "" || len(name) > 40 || !printableValue(name)) {
			t.Fatalf("readEnumAttr(%q) = %q", b, name)
		}
	})
}
