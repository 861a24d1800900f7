package slurm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/sysread"
)

func TestReadTokenModes(t *testing.T) {
	cases := []struct {
		mode os.FileMode
		ok   bool
	}{
		{0o600, true},
		{0o400, true},
		{0o640, false},
		{0o644, false},
		{0o604, false},
		{0o620, false},
		{0o602, false},
	}
	for _, c := range cases {
		p := writeToken(t, testToken, c.mode)
		tok, err := readToken(p)
		if c.ok {
			if err != nil || tok != testToken {
				t.Errorf("%04o: %v", c.mode, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%04o: accepted", c.mode)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, p) {
			t.Errorf("%04o: error does not name the file: %v", c.mode, err)
		}
		if want := "mode " + octal(c.mode); !strings.Contains(msg, want) {
			t.Errorf("%04o: error lacks %q: %v", c.mode, want, err)
		}
		if strings.Contains(msg, testToken) {
			t.Errorf("%04o: token in error", c.mode)
		}
	}
}

func octal(m os.FileMode) string {
	const digits = "01234567"
	p := uint32(m.Perm())
	return "0" + string([]byte{digits[p>>6&7], digits[p>>3&7], digits[p&7]})
}

func TestReadTokenOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	p := writeToken(t, testToken, 0o600)
	if err := os.Chown(p, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	_, err := readToken(p)
	if err == nil || !strings.Contains(err.Error(), "owned by uid 4242") {
		t.Errorf("foreign owner: %v", err)
	}
}

func TestReadTokenFormats(t *testing.T) {
	good := map[string]string{
		"bare":          testToken,
		"newline":       testToken + "\n",
		"spaces":        "  " + testToken + " \n\n",
		"scontrol":      "SLURM_JWT=" + testToken + "\n",
		"export":        "export SLURM_JWT=" + testToken + "\n",
		"comment first": "# for gpuhc\nSLURM_JWT=" + testToken + "\n",
	}
	for name, content := range good {
		tok, err := readToken(writeToken(t, content, 0o600))
		if err != nil || tok != testToken {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := map[string]string{
		"empty":       "",
		"blank":       " \n\n",
		"empty jwt":   "SLURM_JWT=\n",
		"two lines":   testToken + "\n" + testToken + "\n",
		"inner space": "abc def",
		"control":     "abc\x01def",
	}
	for name, content := range bad {
		_, err := readToken(writeToken(t, content, 0o600))
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), testToken) || strings.Contains(err.Error(), "abc") {
			t.Errorf("%s: token material in error: %v", name, err)
		}
	}
}

func TestReadTokenNotRegular(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := readToken(dir); err == nil {
		t.Error("directory accepted")
	}
	if _, err := readToken(dir + "/missing"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: %v", err)
	}
}

// A token file that is a FIFO used to block open(2) until the watchdog:
// no drain, even with scontrol to fall back on. It is refused at once,
// as /dev/zero (endless) is.
func TestReadTokenFIFOAndDeviceRefusedAtOnce(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "slurmrestd.token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 1)
		go func() { _, err := readToken(p); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, sysread.ErrNotRegular) || !strings.Contains(err.Error(), p) {
				t.Errorf("%s: %v; want a not-a-regular-file error naming it", p, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: readToken blocked", p)
		}
	}
}

// A symbolic link that someone else could retarget would send another
// root-only file to slurmrestd as the token: the path is checked link by
// link (internal/safepath has the whole rule).
func TestReadTokenThroughLinks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a link to another owner")
	}
	dir := t.TempDir()
	real := filepath.Join(dir, "real.token")
	if err := os.WriteFile(real, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ours := filepath.Join(dir, "ours.token")
	theirs := filepath.Join(dir, "theirs.token")
	for _, l := range []string{ours, theirs} {
		if err := os.Symlink(real, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Lchown(theirs, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if tok, err := readToken(ours); err != nil || tok != testToken {
		t.Errorf("a link of ours: %v", err)
	}
	if _, err := readToken(theirs); err == nil || !strings.Contains(err.Error(), "symbolic link "+theirs+": owned by uid 4242") {
		t.Errorf("a link of uid 4242: %v", err)
	}
}
