// Package atomicfile replaces small files so that a reader, or a crash,
// sees the old content or the new, never a torn mix.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Options tune Write.
type Options struct {
	// Mode of the new file; the temp file is created 0600 and changed.
	Mode fs.FileMode
	// DirMode is used when the directory has to be created.
	DirMode fs.FileMode
	// Sync fsyncs before the rename, for state that must survive a power
	// cut. Files rewritten every run anyway (metrics) can skip the flush.
	Sync bool
	// Pattern names the temp file (os.CreateTemp syntax); a leading dot
	// keeps it out of node_exporter's textfile glob.
	Pattern string
}

// Write replaces path with data: a temp file in the same directory, then a
// rename over path.
func Write(path string, data []byte, o Options) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, o.DirMode); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, o.Pattern)
	if err != nil {
		return fmt.Errorf("create temp file for %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if err := fill(tmp, data, o); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename to %s: %w", path, err)
	}
	return nil
}

func fill(f *os.File, data []byte, o Options) error {
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err := f.Chmod(o.Mode); err != nil {
		return fmt.Errorf("chmod %s: %w", f.Name(), err)
	}
	if o.Sync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", f.Name(), err)
		}
	}
	return nil
}

// State is the setting for gpuhc's own state files: root-only, fsynced.
func State(pattern string) Options {
	return Options{Mode: 0o640, DirMode: 0o750, Sync: true, Pattern: pattern}
}
