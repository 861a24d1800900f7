package procscan

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Any stat file: comm is what lies between the first '(' and the last
// ')', the state is one non-blank byte after it, and Start reads field
// 22 or says why not.
func FuzzParseStat(f *testing.F) {
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{"", "(", ")", ")(", "1 () Z", "1 (a) ", "812 (nv-hostengine) S 1 812 812 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 4321 1 1",
		"1 (a) b) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 18446744073709551616", "1 (x) SS 1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseStat(b)
		if err != nil {
			return
		}
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if st.Comm != string(b[open+1:end]) || bytes.IndexByte([]byte(" \t\n\v\f\r"), st.State) >= 0 {
			t.Fatalf("ParseStat(%q) = %q %q", b, st.Comm, st.State)
		}
		fields := bytes.Fields(b[end+1:])
		if start, err := st.Start(); err == nil && (len(fields) < 20 || strconv.FormatUint(start, 10) != strings.TrimLeft(string(fields[19]), "0") && start != 0) {
			t.Fatalf("Start of %q = %d, not field 22", b, start)
		}
	})
}
