package sysread

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func write(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "attr")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		max     int64
		want    string
		err     string // substring after "read <path>: "; "" means no error
	}{
		{"within the cap", "hello\n", 6, "hello\n", ""},
		{"empty file", "", 6, "", ""},
		{"one byte over the cap", "hello!\n", 6, "", "larger than 6 bytes"},
		{"far over the cap", strings.Repeat("x", 1<<20), 4096, "", "larger than 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write(t, tc.content)
			b, err := File(p, tc.max)
			if tc.err == "" {
				if err != nil || string(b) != tc.want {
					t.Fatalf("File = %q, %v; want %q", b, err, tc.want)
				}
				return
			}
			if err == nil || err.Error() != "read "+p+": "+tc.err {
				t.Fatalf("File error = %v; want %q", err, "read "+p+": "+tc.err)
			}
			if b != nil {
				t.Errorf("File returned %d bytes with an error", len(b))
			}
		})
	}
}

// A missing file's error names the path once and still says ErrNotExist,
// which callers use to tell "absent" from "unreadable".
func TestFileMissing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nope")
	for name, read := range map[string]func() error{
		"File": func() error { _, err := File(p, MaxAttr); return err },
		"Attr": func() error { _, err := Attr(p); return err },
		"Text": func() error { _, err := Text(p, 8); return err },
	} {
		err := read()
		if err == nil {
			t.Fatalf("%s: no error for a missing file", name)
		}
		if got, want := err.Error(), "read "+p+": no such file or directory"; got != want {
			t.Errorf("%s error = %q, want %q", name, got, want)
		}
		if n := strings.Count(err.Error(), p); n != 1 {
			t.Errorf("%s error names the path %d times: %v", name, n, err)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s error %v is not fs.ErrNotExist", name, err)
		}
	}
}

func TestAttr(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		want    string
		wantErr bool
	}{
		{"newline trimmed", "4X (100 Gbps)\n", "4X (100 Gbps)", false},
		{"surrounding space trimmed", "  ACTIVE \n\n", "ACTIVE", false},
		{"exactly one page", strings.Repeat("a", MaxAttr), strings.Repeat("a", MaxAttr), false},
		{"over one page", strings.Repeat("a", MaxAttr+1), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Attr(write(t, tc.content))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("Attr = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestText(t *testing.T) {
	p := write(t, "12345678\n")
	if _, err := Text(p, 8); err == nil || !strings.Contains(err.Error(), "larger than 8 bytes") {
		t.Errorf("Text over its cap: error %v, want larger than 8 bytes", err)
	}
	if got, err := Text(p, 9); err != nil || got != "12345678" {
		t.Errorf("Text = %q, %v; want \"12345678\"", got, err)
	}
}

func TestBare(t *testing.T) {
	errno := errors.New("permission denied")
	for _, tc := range []struct {
		name string
		in   error
		want error
	}{
		{"path error unwrapped", &fs.PathError{Op: "open", Path: "/sys/x", Err: errno}, errno},
		{"wrapped path error unwrapped", errors.Join(&fs.PathError{Op: "open", Path: "/sys/x", Err: errno}), errno},
		{"other error kept", errno, errno},
		{"nil kept", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Bare(tc.in); got != tc.want {
				t.Errorf("Bare(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestPrintable(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"mlx5_0/1", "mlx5_0/1"},
		{"  temp1  ", "temp1"},
		{"temp1\n", "temp1?"}, // unprintable before trimming: a newline still shows
		{"a\nb\tc\x1b[31m", "a?b?c?[31m"},
		{"\xff\xfe garbage", "? garbage"}, // a run of invalid UTF-8 is one '?'
		{"caf\u00e9 90\u00b0C", "caf\u00e9 90\u00b0C"},
		{"line\u2028sep", "line?sep"},
		{"", ""},
	} {
		got := Printable(tc.in)
		if got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if Printable(got) != got {
			t.Errorf("Printable(%q) = %q is not stable", tc.in, got)
		}
	}
}

func TestQuoteShort(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"", `""`},
		{"garbage", `"garbage"`},
		{strings.Repeat("x", 24), `"` + strings.Repeat("x", 24) + `"`},
		{strings.Repeat("x", 25), `"` + strings.Repeat("x", 24) + `..."`},
		{strings.Repeat("x", 1<<20), `"` + strings.Repeat("x", 24) + `..."`},
		{"\x01\xffgarbage\n", `"\x01\xffgarbage\n"`},
		// "é" at bytes 23-24 is dropped whole rather than split.
		{strings.Repeat("x", 23) + "\u00e9tail", `"` + strings.Repeat("x", 23) + `..."`},
	} {
		if got := QuoteShort(tc.in); got != tc.want {
			t.Errorf("QuoteShort(%.40q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"one too long", 11, "one too ..."},
		{"\u00e9\u00e9\u00e9\u00e9", 6, "\u00e9..."}, // 8 bytes; no rune is split
		{"abcdef", 2, "..."},
	} {
		if got := Cut(tc.in, tc.max); got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

// What is not a regular file is refused at once, never read: a FIFO
// nobody writes would block open(2) or read(2) forever, /dev/zero never
// ends. A link to a regular file is read (sysfs is made of links).
func TestRegularRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(write(t, "0x10de\n"), link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string
	}{
		{fifo, "not a regular file (a named pipe)"},
		{dir, "not a regular file (a directory)"},
		{"/dev/zero", "not a regular file (a character device)"},
		{"/dev/null", "not a regular file (a character device)"},
	} {
		done := make(chan error, 1)
		go func() { _, err := Regular(tc.path, MaxAttr); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || err.Error() != "read "+tc.path+": "+tc.want {
				t.Errorf("%s: %v; want %q", tc.path, err, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Regular blocked", tc.path)
		}
	}
	if b, err := Regular(link, MaxAttr); err != nil || string(b) != "0x10de\n" {
		t.Errorf("link to a regular file: %q, %v", b, err)
	}
}
