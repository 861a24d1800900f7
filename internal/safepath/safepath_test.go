package safepath

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another owner")
	}
	const other = 4242
	tests := []struct {
		name  string
		build func(t *testing.T, d string) string // returns the path to check
		want  string                              // "" is trusted
	}{
		{"a file in private directories", func(t *testing.T, d string) string {
			return file(t, d, "etc/gpuhc/token")
		}, ""},
		{"a world-writable directory on the way", func(t *testing.T, d string) string {
			p := file(t, d, "open/token")
			chmod(t, filepath.Join(d, "open"), 0o777)
			return p
		}, "mode 0777 lets others replace what it holds"},
		{"a group-writable directory on the way", func(t *testing.T, d string) string {
			p := file(t, d, "grp/sub/token")
			chmod(t, filepath.Join(d, "grp"), 0o775)
			return p
		}, "grp: mode 0775"},
		{"a sticky world-writable directory, as /tmp", func(t *testing.T, d string) string {
			p := file(t, d, "tmp/mine/token")
			chmod(t, filepath.Join(d, "tmp"), 0o777|os.ModeSticky)
			return p
		}, ""},
		{"a directory someone else owns", func(t *testing.T, d string) string {
			p := file(t, d, "theirs/token")
			chown(t, filepath.Join(d, "theirs"), other)
			return p
		}, "directory " + "DIR/theirs: owned by uid 4242"},
		{"a link of ours to a private file", func(t *testing.T, d string) string {
			return link(t, file(t, d, "real/token"), filepath.Join(d, "etc/token"))
		}, ""},
		{"a relative link chain through ..", func(t *testing.T, d string) string {
			file(t, d, "real/token")
			link(t, "../real/token", filepath.Join(d, "a/mid"))
			return link(t, "../a/mid", filepath.Join(d, "b/token"))
		}, ""},
		{"a link someone else owns", func(t *testing.T, d string) string {
			p := link(t, file(t, d, "real/token"), filepath.Join(d, "etc/token"))
			if err := os.Lchown(p, other, other); err != nil {
				t.Fatal(err)
			}
			return p
		}, "symbolic link DIR/etc/token: owned by uid 4242"},
		{"a link into an open directory", func(t *testing.T, d string) string {
			target := file(t, d, "open/token")
			chmod(t, filepath.Join(d, "open"), 0o777)
			return link(t, target, filepath.Join(d, "etc/token"))
		}, "directory DIR/open: mode 0777"},
		{"a link loop", func(t *testing.T, d string) string {
			link(t, "b", filepath.Join(d, "loop/a"))
			return link(t, "a", filepath.Join(d, "loop/b"))
		}, "more than 40 symbolic links"},
		{"missing", func(t *testing.T, d string) string { return filepath.Join(d, "absent") }, "no such file"},
		{"relative", func(t *testing.T, d string) string { return "etc/token" }, "not an absolute path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			err := Check(tc.build(t, d))
			want := strings.ReplaceAll(tc.want, "DIR", d)
			switch {
			case want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Errorf("got %v, want %q", err, want)
			}
		})
	}
}

func file(t *testing.T, d, rel string) string {
	t.Helper()
	p := filepath.Join(d, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func link(t *testing.T, target, at string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, at); err != nil {
		t.Fatal(err)
	}
	return at
}

func chmod(t *testing.T, p string, m os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, m); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, p string, uid int) {
	t.Helper()
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
}
