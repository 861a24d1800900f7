// Package statefile keeps the small JSON records checks carry between runs
// (counters for deltas, the kernel-log cursor) in the state directory.
package statefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/gpuhc/gpuhc/internal/atomicfile"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// ErrCorrupt marks a record that could not be parsed; callers start afresh.
var ErrCorrupt = errors.New("corrupt state record")

// maxRecord caps one record: a few KB when sound (counters per port and
// GPU); a record past this is refused rather than read.
const maxRecord = 16 << 20

// Dir is a state directory. A ReadOnly Dir (a dry run) loads but never
// saves, so a dry run leaves every counter and cursor where it was.
type Dir struct {
	Path     string
	ReadOnly bool
}

// Load reads name into v; a missing record leaves v untouched.
func (d Dir) Load(name string, v any) error {
	p := filepath.Join(d.Path, name)
	b, err := sysread.Regular(p, maxRecord)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w %s: %v", ErrCorrupt, p, err)
	}
	return nil
}

// Save replaces name with v, atomically and fsynced.
func (d Dir) Save(name string, v any) error {
	if d.ReadOnly {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	return atomicfile.Write(filepath.Join(d.Path, name), append(b, '\n'), atomicfile.State("."+name+".*"))
}

// Encode is v as Save writes it, nil if it cannot be encoded: what a check
// keeps of its loaded record to pass to SaveChanged.
func Encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// SaveChanged saves v unless it encodes to before (Encode of the record as
// loaded; nil always saves). A run that changed nothing then writes and
// fsyncs nothing: the healthy steady state leaves the disk alone.
func (d Dir) SaveChanged(name string, v any, before []byte) error {
	if before != nil && bytes.Equal(Encode(v), before) {
		return nil
	}
	return d.Save(name, v)
}
