package slurmconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFind(t *testing.T) {
	conf := "/etc/slurm/slurm.conf"
	tests := []struct {
		name  string
		files map[string]string
		want  int
		note  string
		src   string
	}{
		{"no file: default", nil, 60, "", "default"},
		{"unset", map[string]string{conf: "ClusterName=x\nHealthCheckInterval=30\n"}, 60, "", "unset"},
		{"set", map[string]string{conf: "HealthCheckTimeout=10\n"}, 10, "", conf},
		{"case-insensitive key", map[string]string{conf: "healthchecktimeout=12\n"}, 12, "", conf},
		{"comment ignored", map[string]string{conf: "#HealthCheckTimeout=5\nHealthCheckTimeout=20 # twenty\n"}, 20, "", conf},
		{"last wins", map[string]string{conf: "HealthCheckTimeout=20\nHealthCheckTimeout=30\n"}, 30, "", conf},
		{"zero means default", map[string]string{conf: "HealthCheckTimeout=0\n"}, 60, "", conf},
		{"garbage", map[string]string{conf: "HealthCheckTimeout=ten\n"}, 60, "not a number", conf},
		{"negative", map[string]string{conf: "HealthCheckTimeout=-5\n"}, 60, "not a number", conf},
		{"huge", map[string]string{conf: "HealthCheckTimeout=65536\n"}, 60, "over 65535", conf},
		{"max", map[string]string{conf: "HealthCheckTimeout=65535\n"}, 65535, "", conf},
		{"relative include", map[string]string{conf: "Include hc.conf\n", "/etc/slurm/hc.conf": "HealthCheckTimeout=15\n"}, 15, "", conf},
		{"absolute include, case-insensitive", map[string]string{conf: "INCLUDE /etc/slurm/x/hc.conf\n", "/etc/slurm/x/hc.conf": "HealthCheckTimeout=16\n"}, 16, "", conf},
		{"glob include", map[string]string{conf: "Include conf.d/*.conf\n", "/etc/slurm/conf.d/a.conf": "HealthCheckTimeout=17\n"}, 17, "", conf},
		{"include then override", map[string]string{conf: "Include hc.conf\nHealthCheckTimeout=18\n", "/etc/slurm/hc.conf": "HealthCheckTimeout=15\n"}, 18, "", conf},
		{"include loop bounded", map[string]string{conf: "Include slurm.conf\nHealthCheckTimeout=9\n"}, 60, "deeper than", "default"},
		{"configless cache", map[string]string{"/run/slurm/conf/slurm.conf": "HealthCheckTimeout=11\n"}, 11, "", "/run/slurm/conf/slurm.conf"},
		{"etc first", map[string]string{conf: "HealthCheckTimeout=21\n", "/run/slurm/conf/slurm.conf": "HealthCheckTimeout=11\n"}, 21, "", conf},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, b := range tt.files {
				write(t, root, p, b)
			}
			got := Find(root, Paths)
			if got.Seconds != tt.want {
				t.Errorf("Seconds = %d, want %d (%+v)", got.Seconds, tt.want, got)
			}
			if !strings.Contains(got.Note, tt.note) || (tt.note == "" && got.Note != "") {
				t.Errorf("Note = %q, want %q", got.Note, tt.note)
			}
			if !strings.Contains(got.Source, tt.src) {
				t.Errorf("Source = %q, want %q", got.Source, tt.src)
			}
		})
	}
}

func TestFindUnreadable(t *testing.T) {
	root := t.TempDir()
	write(t, root, "/etc/slurm/slurm.conf", strings.Repeat("#", maxFile+1))
	got := Find(root, Paths)
	if got.Seconds != Default || !strings.Contains(got.Note, "larger than") {
		t.Errorf("got %+v, want the default with a note", got)
	}
}
