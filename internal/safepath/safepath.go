// Package safepath decides whether a path can be trusted with a secret:
// whether anyone but root (or the user gpuhc runs as) could change which
// file it names. A slurmrestd token is root-equivalent, and gpuhc sends
// what it reads to the configured URL, so a symlink someone else can
// retarget would let them send another root-only file there, or swap in
// a token of their own.
//
// The rule, checked component by component as the kernel resolves the
// path (every symbolic link followed, at most 40, as Linux allows):
//   - every directory walked through is owned by root or by us, and is
//     not group- or world-writable unless it is sticky (as /tmp is: an
//     entry there can be moved only by its owner, and the entry is then
//     judged on its own);
//   - every symbolic link on the way is owned by root or by us.
//
// The file itself is judged by the caller (type, mode, owner) on the
// descriptor it opens.
package safepath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxLinks is Linux's limit on symbolic links followed in one lookup
// (MAXSYMLINKS).
const maxLinks = 40

// Check applies the rule to path, which must be absolute.
func Check(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%s: not an absolute path", path)
	}
	w := walker{euid: uint32(os.Geteuid())}
	return w.walk(path)
}

type walker struct {
	euid  uint32
	links int
}

func (w *walker) walk(path string) error {
	cur := "/"
	if err := w.dir(cur); err != nil {
		return err
	}
	rest := parts(path)
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		next := filepath.Join(cur, name) // cur holds no link: ".." is lexical
		fi, err := os.Lstat(next)
		if err != nil {
			return fmt.Errorf("%s: %w", next, bare(err))
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := w.link(next, fi)
			if err != nil {
				return err
			}
			if filepath.IsAbs(target) {
				cur = "/"
			}
			rest = append(parts(target), rest...)
			continue
		case len(rest) > 0: // a directory on the way
			if err := w.dir(next); err != nil {
				return err
			}
		}
		cur = next
	}
	return nil
}

// link checks a symbolic link met on the way and returns its target.
func (w *walker) link(path string, fi fs.FileInfo) (string, error) {
	if w.links++; w.links > maxLinks {
		return "", fmt.Errorf("%s: more than %d symbolic links", path, maxLinks)
	}
	if err := w.owner(path, fi); err != nil {
		return "", fmt.Errorf("symbolic link %w", err)
	}
	target, err := os.Readlink(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, bare(err))
	}
	return target, nil
}

func (w *walker) dir(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, bare(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", path)
	}
	if err := w.owner(path, fi); err != nil {
		return fmt.Errorf("directory %w", err)
	}
	if m := fi.Mode(); m.Perm()&0o022 != 0 && m&fs.ModeSticky == 0 {
		return fmt.Errorf("directory %s: mode %04o lets others replace what it holds", path, m.Perm())
	}
	return nil
}

func (w *walker) owner(path string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: cannot read its owner", path)
	}
	if st.Uid != 0 && st.Uid != w.euid {
		return fmt.Errorf("%s: owned by uid %d; want root or uid %d", path, st.Uid, w.euid)
	}
	return nil
}

func parts(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	return out
}

// bare drops the *PathError wrapper, whose path the caller already names.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
