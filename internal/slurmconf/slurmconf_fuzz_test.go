package slurmconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// Any slurm.conf (Include lines aside: they glob the machine's files):
// the limit is one slurmd can have, the note one short line, and the last
// setting wins whatever came before it.
func FuzzFind(f *testing.F) {
	for _, s := range []string{"", "HealthCheckTimeout=10\n", "NodeName=a HealthCheckTimeout=\"20\" # x\n", "HealthCheckTimeout=65536",
		"HealthCheckTimeout=-1", "HealthCheckTimeout=\xff\x00" + strings.Repeat("9", 500), "healthchecktimeout=0\nHealthCheckTimeout", "#HealthCheckTimeout=5"} {
		f.Add(s)
	}
	root := f.TempDir()
	conf := filepath.Join(root, "etc/slurm/slurm.conf")
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		f.Fatal(err)
	}
	find := func(t *testing.T, data string) Limit {
		if err := os.WriteFile(conf, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return Find(root, []string{"/etc/slurm/slurm.conf"})
	}
	f.Fuzz(func(t *testing.T, data string) {
		if strings.Contains(strings.ToLower(data), "include") {
			return
		}
		l := find(t, data)
		if l.Seconds < 1 || l.Seconds > Max || len(l.Note) > 200 || strings.ContainsFunc(l.Note, func(r rune) bool { return !unicode.IsPrint(r) }) {
			t.Fatalf("Find(%q) = %+v", data, l)
		}
		if l := find(t, data+"\nHealthCheckTimeout=30\n"); l.Seconds != 30 || l.Note != "" {
			t.Fatalf("Find(%q + HealthCheckTimeout=30) = %+v", data, l)
		}
	})
}
