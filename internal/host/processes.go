package host

import (
	"context"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/procscan"
)

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
	found map[string]bool
	procscan.Unreadable
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
	case sc.N > 0:
		// It may be one of the processes we could not read.
		return errorf(name, "not found, but %d processes unreadable: %v", sc.N, sc.First)
	default:
		return failf(name, "not running")
	}
}

func (p *processes) scan(ctx context.Context) (*scan, error) {
	sc := &scan{found: map[string]bool{}}
	err := procscan.Walk(ctx, p.root, func(dir string) bool {
		p.visit(dir, sc)
		return !p.allFound(sc) // the common healthy case ends well before the last pid
	})
	if err != nil {
		return nil, err
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

// visit matches one process against the required names still missing.
func (p *processes) visit(dir string, sc *scan) {
	st, err := procscan.ReadStat(dir)
	if err != nil {
		sc.Note(err)
		return
	}
	if st.Dead() {
		return // a zombie's daemon is dead; only its parent has not reaped it
	}
	for _, name := range p.cfg.Required {
		if sc.found[name] {
			continue
		}
		ok, err := procscan.Runs(dir, st.Comm, name, maxProc)
		if err != nil {
			sc.Note(err)
			return
		}
		sc.found[name] = ok
	}
}
