package slurm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/gpuhc/gpuhc/internal/safepath"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// maxTokenFile bounds what we read from a token file; a JWT is < 2 KiB.
const maxTokenFile = 64 << 10

// readToken loads a slurmrestd JWT. A SlurmUser or root token is
// root-equivalent, so the file must be private to root or to us, and so
// must the way to it: every directory and symbolic link on its path
// (safepath), since a link someone else can retarget would have gpuhc
// send another root-only file to slurmrestd as a token. Errors name the
// file and its mode but never include the token.
func readToken(path string) (string, error) {
	if err := safepath.Check(path); err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	// Open refuses a FIFO at once: a blocking open would wait for a
	// writer, and the drain with it.
	f, err := sysread.Open(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	if err := checkTokenFile(f, path); err != nil {
		return "", err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	if len(data) > maxTokenFile {
		return "", fmt.Errorf("token file %s: larger than %d bytes", path, maxTokenFile)
	}
	tok, err := parseToken(data)
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	return tok, nil
}

// checkTokenFile inspects the opened file, not the path, so the file we
// judged is the one we read.
func checkTokenFile(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("token file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("token file %s: not a regular file (mode %s)", path, fi.Mode())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("token file %s: mode %04o is group- or world-accessible; want 0600 or 0400", path, perm)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("token file %s: cannot read its owner", path)
	}
	if euid := os.Geteuid(); st.Uid != 0 && int(st.Uid) != euid {
		return fmt.Errorf("token file %s: owned by uid %d; want root or uid %d", path, st.Uid, euid)
	}
	return nil
}

// parseToken accepts the bare token or the `SLURM_JWT=...` line that
// `scontrol token` prints (optionally after `export `).
func parseToken(data []byte) (string, error) {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxTokenFile)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if len(lines) != 1 {
		return "", fmt.Errorf("want one token line, found %d", len(lines))
	}
	tok := strings.TrimPrefix(lines[0], "export ")
	tok = strings.TrimSpace(strings.TrimPrefix(tok, "SLURM_JWT="))
	if tok == "" {
		return "", errors.New("empty token")
	}
	// A token goes into an HTTP header; refuse what would break or inject one.
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] == 0x7f {
			return "", fmt.Errorf("token has whitespace or a control character at byte %d", i)
		}
	}
	return tok, nil
}
