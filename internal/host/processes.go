package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// commLen is the most the kernel keeps of a process name (TASK_COMM_LEN-1).
const commLen = 15

type processes struct {
	root string
	cfg  config.Processes
}

// NewProcesses checks that each required process name is running.
func NewProcesses(root string, c config.Processes) check.Check {
	return &processes{root: root, cfg: c}
}

func (p *processes) Name() string { return nameProcesses }

// scan is what one pass over /proc found.
type scan struct {
	found      map[string]bool
	unreadable int   // processes we could not read (not counting vanished ones)
	firstErr   error // the first such error, for the message
}

func (p *processes) Run(ctx context.Context) []check.Result {
	if len(p.cfg.Required) == 0 {
		return stamp(nameProcesses, []check.Result{skipf(componentHost, "no required processes configured")})
	}
	sc, err := p.scan(ctx)
	if err != nil {
		return stamp(nameProcesses, []check.Result{errorf(componentHost, "%v", err)})
	}
	out := make([]check.Result, 0, len(p.cfg.Required))
	for _, name := range p.cfg.Required {
		out = append(out, sc.judge(name))
	}
	return stamp(nameProcesses, out)
}

func (sc *scan) judge(name string) check.Result {
	switch {
	case name == "":
		return errorf(componentHost, "empty process name in config")
	case sc.found[name]:
		return okf(name, "running")
	case sc.unreadable > 0:
		// It may be one of the processes we could not read.
		return errorf(name, "not found, but %d processes unreadable: %v", sc.unreadable, sc.firstErr)
	default:
		return failf(name, "not running")
	}
}

func (p *processes) scan(ctx context.Context) (*scan, error) {
	dir := at(p.root, "proc")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, bare(err))
	}
	sc := &scan{found: map[string]bool{}}
	for _, e := range ents {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted: %w", ctx.Err())
		}
		if p.allFound(sc) {
			break // the common healthy case ends well before the last pid
		}
		if isPID(e.Name()) {
			p.visit(filepath.Join(dir, e.Name()), sc)
		}
	}
	return sc, nil
}

func (p *processes) allFound(sc *scan) bool {
	for _, name := range p.cfg.Required {
		if !sc.found[name] {
			return false
		}
	}
	return true
}

func isPID(s string) bool {
	return s != "" && len(s) <= 10 && strings.Trim(s, "0123456789") == ""
}

// visit matches one process against the required names still missing.
func (p *processes) visit(dir string, sc *scan) {
	comm, state, err := readStat(dir)
	if err != nil {
		sc.note(err)
		return
	}
	if state == 'Z' || state == 'X' {
		return // a zombie's daemon is dead; only its parent has not reaped it
	}
	for _, name := range p.cfg.Required {
		switch {
		case sc.found[name]:
		case comm == name:
			sc.found[name] = true
		case truncatedTo(comm, name):
			// Read cmdline only now: such reads can block on a process
			// stuck in the kernel, so we avoid them for every other pid.
			ok, err := argv0Matches(dir, name)
			if err != nil {
				sc.note(err)
				return
			}
			sc.found[name] = ok
		}
	}
}

func (sc *scan) note(err error) {
	if vanished(err) {
		return
	}
	sc.unreadable++
	if sc.firstErr == nil {
		sc.firstErr = err
	}
}

// argv0Matches tells "nvidia-persistenced" from another name sharing its
// first 15 bytes, by argv[0]. An empty argv[0], or one rewritten into a
// title with spaces ("name: worker"), cannot disprove the comm match.
func argv0Matches(dir, name string) (bool, error) {
	argv0, err := readArgv0(dir)
	if err != nil {
		return false, err
	}
	return argv0 == "" || strings.Contains(argv0, " ") || filepath.Base(argv0) == name, nil
}

// truncatedTo says whether comm is the kernel's truncation of a longer name.
func truncatedTo(comm, name string) bool {
	return len(name) > commLen && len(comm) == commLen && name[:commLen] == comm
}

// vanished reports errors of a process that exited while we read it,
// which is normal on a busy node.
func vanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// readStat reads comm and state from /proc/<pid>/stat. comm there is the
// same as /proc/<pid>/comm, so one read gives both.
func readStat(dir string) (comm string, state byte, err error) {
	path := filepath.Join(dir, "stat")
	b, err := readFile(path, maxAttr)
	if err != nil {
		return "", 0, err
	}
	comm, state, err = parseStat(b)
	if err != nil {
		return "", 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return comm, state, nil
}

// parseStat reads "812 (nv-hostengine) S 1 812 ...". comm may itself hold
// spaces and parentheses, so it runs to the last ')'.
func parseStat(b []byte) (comm string, state byte, err error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0, fmt.Errorf("no (comm) in %s", quoteShort(string(b)))
	}
	rest := bytes.Fields(b[end+1:])
	if len(rest) == 0 || len(rest[0]) != 1 {
		return "", 0, fmt.Errorf("no state after comm in %s", quoteShort(string(b)))
	}
	return string(b[open+1 : end]), rest[0][0], nil
}

func readArgv0(dir string) (string, error) {
	b, err := readFile(filepath.Join(dir, "cmdline"), maxProc)
	if err != nil {
		return "", err
	}
	argv0, _, _ := bytes.Cut(b, []byte{0})
	return string(argv0), nil
}
