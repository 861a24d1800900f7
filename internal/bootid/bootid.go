// Package bootid reads the kernel's boot id, which tells one boot from
// the next: event records carry it (MTTF), the IB counters and the kernel
// log cursor are valid only within it. A run reads it once (Once) and
// every user shares that answer, so that they cannot disagree.
package bootid

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/gpuhc/gpuhc/internal/lazyre"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// Path is where the kernel publishes it, relative to the root.
const Path = "proc/sys/kernel/random/boot_id"

var re = lazyre.New(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// Read reads the boot id under root; anything but a lower-case UUID is an
// error.
func Read(root string) (string, error) {
	p := filepath.Join(root, Path)
	s, err := sysread.Attr(p)
	if err != nil {
		return "", err
	}
	if !re.MatchString(s) {
		return "", fmt.Errorf("%s: not a boot id: %s", p, sysread.QuoteShort(s))
	}
	return s, nil
}

// Once is one run's read of the boot id, made on first use.
type Once struct {
	root string
	once sync.Once
	id   string
	err  error
}

// New returns the run's boot id under root, not yet read.
func New(root string) *Once { return &Once{root: root} }

// Get returns the boot id and why it could not be read.
func (o *Once) Get() (string, error) {
	o.once.Do(func() { o.id, o.err = Read(o.root) })
	return o.id, o.err
}

// ID is the boot id, or "" when it could not be read (events record
// an unknown boot as no boot id).
func (o *Once) ID() string {
	id, _ := o.Get()
	return id
}
