// Package slurmconf finds the HealthCheckTimeout that slurmd enforces on
// the health check program.
//
// Slurm 26.05 added HealthCheckTimeout (seconds, default 60, at most
// 65535; "0" and out-of-range values mean the default): at expiry slurmd
// sends the program's process group SIGTERM, then SIGKILL 10 ms later.
// Earlier versions kill at a fixed 60 s. HealthCheckProgram runs with
// SLURMD_NODENAME but without SLURM_CONF, so the file is found at the
// standard paths: /etc/slurm/slurm.conf, or, on a configless node, the
// copy slurmd caches (/run/slurm/conf/slurm.conf, a link slurmd makes to
// SlurmdSpoolDir/conf-cache; verified in 26.05.5's slurmd strings).
package slurmconf

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/sysread"
)

// Default is the limit when nothing sets one: 26.05's default and the
// fixed kill of every earlier version, in seconds.
const Default = 60

// Max is the largest HealthCheckTimeout slurmd accepts (a uint16).
const Max = 65535

// Bounds on what is read: slurm.conf and its includes are text an admin
// writes, but a loop of Include lines or a huge file must not stall a
// health check.
const (
	maxFile  = 1 << 20
	maxFiles = 32
	maxDepth = 8
)

// Paths are where slurmd's config is looked for, in order: the standard
// file, then the configless cache.
var Paths = []string{"/etc/slurm/slurm.conf", "/run/slurm/conf/slurm.conf", "/var/spool/slurmd/conf-cache/slurm.conf", "/var/lib/slurm/slurmd/conf-cache/slurm.conf"}

// Limit is the health check's time limit and where it came from.
type Limit struct {
	Seconds int
	// Source names the file (or "default"); Note says why a value found
	// was not used ("HealthCheckTimeout=abc is not a number").
	Source string
	Note   string
}

// Find reads the first of paths (under root, "" for /) that exists and
// returns the limit it sets; Default when none exists or none sets it.
func Find(root string, paths []string) Limit {
	for _, p := range paths {
		full := filepath.Join("/", root, p)
		val, found, err := lookup(root, full)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && !strings.Contains(err.Error(), "Include") {
				continue
			}
			return Limit{Seconds: Default, Source: "default", Note: err.Error()}
		}
		if !found {
			return Limit{Seconds: Default, Source: p + " (HealthCheckTimeout unset)"}
		}
		return parse(val, p)
	}
	return Limit{Seconds: Default, Source: "default"}
}

// parse applies slurmd's rule: 0 and values over Max reset to the default.
func parse(val, source string) Limit {
	n, err := strconv.ParseUint(val, 10, 64)
	switch {
	case err != nil:
		return Limit{Seconds: Default, Source: source, Note: fmt.Sprintf("HealthCheckTimeout=%s is not a number; slurmd uses %d", sysread.QuoteShort(val), Default)}
	case n == 0:
		return Limit{Seconds: Default, Source: source}
	case n > Max:
		return Limit{Seconds: Default, Source: source, Note: fmt.Sprintf("HealthCheckTimeout=%d is over %d; slurmd uses %d", n, Max, Default)}
	}
	return Limit{Seconds: int(n), Source: source}
}

// lookup returns the last HealthCheckTimeout value set in path or the
// files it includes (the last setting wins, as in slurm.conf).
func lookup(root, path string) (string, bool, error) {
	w := walker{root: root}
	if err := w.file(path, 0); err != nil {
		return "", false, err
	}
	return w.val, w.found, nil
}

type walker struct {
	root  string
	files int
	val   string
	found bool
}

func (w *walker) file(path string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s: includes nested deeper than %d", path, maxDepth)
	}
	if w.files++; w.files > maxFiles {
		return fmt.Errorf("%s: more than %d included files", path, maxFiles)
	}
	b, err := sysread.File(path, maxFile)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if err := w.line(path, line, depth); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) line(path, line string, depth int) error {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	line = strings.TrimSpace(line)
	if k, rest, ok := strings.Cut(line, " "); ok && strings.EqualFold(k, "include") {
		return w.include(path, strings.TrimSpace(rest), depth)
	}
	// A line may hold several Key=Value pairs (slurm.conf's node lines);
	// keys are case-insensitive.
	for _, field := range strings.Fields(line) {
		k, v, ok := strings.Cut(field, "=")
		if ok && strings.EqualFold(k, "HealthCheckTimeout") {
			w.val, w.found = strings.Trim(v, `"`), true
		}
	}
	return nil
}

// include follows an Include line: a path relative to the including
// file's directory, globs allowed (as slurmd does).
func (w *walker) include(from, pattern string, depth int) error {
	pattern = strings.Trim(pattern, `"`)
	if filepath.IsAbs(pattern) {
		pattern = filepath.Join("/", w.root, pattern)
	} else {
		pattern = filepath.Join(filepath.Dir(from), pattern)
	}
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return fmt.Errorf("%s: Include %s: %w", from, pattern, err)
	}
	for _, m := range matches {
		if err := w.file(m, depth+1); err != nil {
			return err
		}
	}
	return nil
}
