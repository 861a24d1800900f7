package config

import "time"

// Prolog configures gpuhc-prolog (slurmd's Prolog).
type Prolog struct {
	// Budget bounds the whole prolog run.
	Budget Duration `toml:"budget"`
}

// Epilog configures gpuhc-epilog (slurmd's Epilog).
type Epilog struct {
	Budget Duration `toml:"budget"`
}

func defaultProlog() Prolog { return Prolog{Budget: Duration{5 * time.Second}} }

func defaultEpilog() Epilog { return Epilog{Budget: Duration{10 * time.Second}} }

func (ps *problems) prolog(p Prolog) {
	ps.timeout("prolog.budget", p.Budget.Duration, MaxDeadline, false)
}

func (ps *problems) epilog(e Epilog) {
	ps.timeout("epilog.budget", e.Budget.Duration, MaxDeadline, false)
}
